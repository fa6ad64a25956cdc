"""The `trainyard` command line."""

from __future__ import annotations

import sys

import click

from services.core import auth, errors
from services.core.config import Config
from services.core.store import open_store


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Trainyard: one endpoint for training."""


@main.command()
def up() -> None:
    """Start the whole stack on this machine (SQLite, SeaweedFS, the services, Envoy)."""
    from infra.stack import Stack

    sys.exit(Stack(Config.from_env()).run())


@main.group()
def admin() -> None:
    """Administer the deployment directly through its store."""


@admin.command("create-key")
@click.option("--org", required=True, help="The org the key acts in.")
@click.option("--role", required=True, type=click.Choice(auth.ROLES), help="What the key may do.")
@click.option("--label", default="", help="A non-secret note about who holds it.")
def create_key(org: str, role: str, label: str) -> None:
    """Create an API key and print it once; only its hash is stored."""
    store = open_store(Config.from_env().database_url)
    try:
        with store.unit() as session:
            key_id, key = auth.create_key(session, org=org, role=role, label=label)
    except errors.DomainError as exc:
        raise click.UsageError(exc.message) from None
    finally:
        store.dispose()
    click.echo(key)
    click.echo(f"key id {key_id}, org {org}, role {role}; it is not shown again", err=True)


if __name__ == "__main__":
    main()
