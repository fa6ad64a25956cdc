"""`trainyard admin keys`, `trainyard audit` and `trainyard limits`: the org's keys, its
audit trail and its limits, over the API with the SDK alone, so an org's admin runs them
from the client install."""

from __future__ import annotations

import datetime as dt
import re

import click

from trainyard.cli_base import client as _client
from trainyard.cli_base import print_message as _print
from trainyard.org.v1 import key_pb2, limits_pb2

# `--since 2h`: a span back from now, in seconds, minutes, hours or days.
_SPAN = re.compile(r"^(\d{1,9})([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _when(value: str, option: str) -> str:
    """An RFC 3339 time, or a span back from now (`30m`, `2h`, `7d`), as the trail reads it."""
    if not value:
        return ""
    if span := _SPAN.match(value):
        back = dt.timedelta(seconds=int(span[1]) * _UNITS[span[2]])
        return (dt.datetime.now(dt.UTC) - back).isoformat()
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            "an RFC 3339 time or a span such as 2h", param_hint=option
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).isoformat()


def _cents(cents: float | None) -> str:
    """US cents as dollars; `none` for a cap that is not set."""
    return "none" if cents is None else f"${cents / 100:,.4f}"


def _time(stamp: object, has: bool) -> str:
    return f"{stamp.ToDatetime():%Y-%m-%dT%H:%M:%SZ}" if has else "-"  # type: ignore[attr-defined]


def _scope(key: key_pb2.ApiKey) -> str:
    cap = float(key.monthly_spend_cap) if key.HasField("monthly_spend_cap") else None
    return (
        f"projects {','.join(key.projects) or 'all'}; bases {','.join(key.bases) or 'all'}; "
        f"spent {_cents(key.spend_this_month)} of {_cents(cap)} this month; "
        f"expires {_time(key.expire_time, key.HasField('expire_time'))}"
    )


@click.group()
def keys() -> None:
    """Make, list, revoke and rotate the org's API keys (an org admin's key, or the
    operator's with `trainyard --org ORG`); a secret is printed once, when it is made."""


@keys.command("list")
@click.pass_context
def keys_list(ctx: click.Context) -> None:
    """The org's keys, newest first: id, status, role, label and limits; never a secret."""
    with _client(ctx) as client:
        found = list(client.list_keys())
    for key in found:
        click.echo(f"{key.id}  {key.status:<7} {key.role:<8} {key.label or '-'}  {_scope(key)}")


@keys.command("get")
@click.argument("key_id")
@click.pass_context
def keys_get(ctx: click.Context, key_id: str) -> None:
    """One key as JSON (never its secret)."""
    with _client(ctx) as client:
        _print(client.get_key(key_id))


def _made(key: key_pb2.ApiKey, secret_only: bool) -> None:
    if secret_only:
        click.echo(key.secret)
    else:
        _print(key)
    click.echo(f"key id {key.id}; its secret is not shown again", err=True)


@keys.command("create")
@click.option(
    "--role",
    required=True,
    type=click.Choice(["member", "admin", "executor"]),
    help="What the key may do.",
)
@click.option("--label", default="", help="A non-secret note about who holds it.")
@click.option("--project", "projects", multiple=True, help="Limit it to this project (repeat).")
@click.option("--base", "bases", multiple=True, help="Limit it to this base model (repeat).")
@click.option(
    "--monthly-spend-cap", type=click.IntRange(min=0), help="US cents its jobs may spend a month."
)
@click.option("--ttl", "ttl_seconds", type=click.IntRange(min=1), help="Seconds until it expires.")
@click.option("--secret-only", is_flag=True, help="Print only the secret (for scripts).")
@click.pass_context
def keys_create(
    ctx: click.Context,
    role: str,
    label: str,
    projects: tuple[str, ...],
    bases: tuple[str, ...],
    monthly_spend_cap: int | None,
    ttl_seconds: int | None,
    secret_only: bool,
) -> None:
    """Make a key of the org and print it with its secret, once."""
    with _client(ctx) as client:
        made = client.create_key(
            role,
            label=label,
            projects=projects,
            bases=bases,
            monthly_spend_cap=monthly_spend_cap,
            ttl_seconds=ttl_seconds,
        )
    _made(made, secret_only)


@keys.command("revoke")
@click.argument("key_id")
@click.pass_context
def keys_revoke(ctx: click.Context, key_id: str) -> None:
    """Revoke a key: its very next call is refused, through every service."""
    with _client(ctx) as client:
        gone = client.revoke_key(key_id)
    click.echo(f"{gone.id}  revoked {_time(gone.revoke_time, gone.HasField('revoke_time'))}")


@keys.command("rotate")
@click.argument("key_id")
@click.option("--secret-only", is_flag=True, help="Print only the new secret (for scripts).")
@click.pass_context
def keys_rotate(ctx: click.Context, key_id: str, secret_only: bool) -> None:
    """Give a key a new secret (printed once); the old secret is refused from now on."""
    with _client(ctx) as client:
        _made(client.rotate_key(key_id), secret_only)


@click.command()
@click.option("--actor", default="", help="Only what this key (its id) did.")
@click.option("--action", default="", help="An event name, or a prefix ending in * .")
@click.option("--since", default="", help="From this time (RFC 3339) or span back (2h, 7d).")
@click.option("--until", default="", help="Before this time (RFC 3339) or span back.")
@click.option("--limit", default=25, show_default=True, help="At most this many entries.")
@click.pass_context
def audit(ctx: click.Context, actor: str, action: str, since: str, until: str, limit: int) -> None:
    """The org's audit trail, newest first (an org admin's key, or the operator's with
    `trainyard --org ORG`): when,
    what, to what, and the key that did it, with its own org where it acted in another."""
    start, end = _when(since, "--since"), _when(until, "--until")
    with _client(ctx) as client:
        for count, entry in enumerate(
            client.audit(actor=actor, action=action, since=start or None, until=end or None),
            start=1,
        ):
            who = entry.key_id or "-"
            if entry.key_role:
                who += f" ({entry.key_role}{', ' + entry.key_label if entry.key_label else ''})"
            if entry.key_org and entry.key_org != entry.org:
                who += f" of {entry.key_org}"
            click.echo(
                f"{entry.create_time.ToDatetime():%Y-%m-%d %H:%M:%S}  {entry.action:<36} "
                f"{entry.subject or '-':<24} {entry.code or '-':<16} {who}"
            )
            if count >= limit:
                break


def _usage(name: str, usage: limits_pb2.Usage, unit: str = "") -> str:
    limit = f"{usage.limit:,}{unit}" if usage.HasField("limit") else "no limit"
    return f"{name:<18} {usage.used:,}{unit} of {limit}"


@click.command()
@click.pass_context
def limits(ctx: click.Context) -> None:
    """The org's limits and its use of them (jobs, clients, pending uploads, this month's
    spend against its caps), and this key's own scope and spend."""
    with _client(ctx) as client:
        found = client.limits()
    click.echo(_usage("active jobs", found.active_jobs))
    click.echo(_usage("training clients", found.training_clients))
    click.echo(_usage("pending uploads", found.pending_uploads, " bytes"))
    spend = found.spend_this_month
    cap = spend.limit if spend.HasField("limit") else None
    click.echo(f"{'spend this month':<18} {_cents(spend.used)} of {_cents(cap)}")
    for line in found.project_spend:
        cap = line.limit if line.HasField("limit") else None
        click.echo(f"  project {line.project}: {_cents(line.used)} of {_cents(cap)}")
    key = found.key
    click.echo(f"{'this key':<18} {key.id} ({key.role}): {_scope(key)}")
