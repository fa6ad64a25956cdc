"""The operator's commands that work on a deployment on this machine: `trainyard up`,
`trainyard status`, and the store's own `trainyard admin create-key|revoke-key|credit`
(`admin keys` is the client's, over the API). The `trainyard` command finds them by entry
point."""

from __future__ import annotations

import contextlib
import decimal
import sys
from pathlib import Path

import click
import sqlalchemy as sa

from services.core import audit, auth, errors
from services.core.config import Config, ConfigError
from services.core.money import ledger
from services.core.store import Store, create_engine, normalise_url, open_store, utcnow
from trainyard.private import private


@click.command()
def up() -> None:
    """Start the whole stack on this machine (SQLite, SeaweedFS, the services, Envoy)."""
    from infra.stack import Stack

    private()  # what the stack writes, and every process it starts, is this user's alone
    try:
        config = Config.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(Stack(config).run())


@click.command()
def status() -> None:
    """One screen of the stack running here: each process up and healthy, its restarts,
    the queue depth, the jobs running and the executors connected."""
    from rich.console import Console

    from infra import status as board

    try:
        config = Config.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        report = board.gather(config.home, config.run_dir, config.bind_host, config.database_url)
    except board.NoStack:
        click.echo(f"no stack is running under {config.home}; `make up` starts one")
        sys.exit(1)
    board.render(report, Console())
    sys.exit(0 if report.ok else 1)


@click.command()
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for it to end.")
def restart(timeout: float) -> None:
    """Restart the stack's service processes one at a time onto the code installed now
    (a rolling restart): each is healthy again before the next stops, and running jobs go
    on. The object store, Envoy and the executor keep running."""
    import json
    import os
    import signal
    import time

    from infra import status as board

    try:
        config = Config.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        before = board.read_info(config.run_dir)
    except board.NoStack:
        click.echo(f"no stack is running under {config.home}; `make up` starts one")
        sys.exit(1)
    generation = int(before.get("roll", {}).get("generation", 0))
    os.kill(int(before["supervisor_pid"]), signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = board.read_info(config.run_dir)
        except (board.NoStack, json.JSONDecodeError):
            raise click.ClickException("the stack stopped during the restart") from None
        roll = info.get("roll", {})
        if int(roll.get("generation", 0)) > generation and roll.get("finished"):
            if roll.get("failed"):
                raise click.ClickException(
                    f"{roll['failed']} did not come back; the supervisor keeps starting it "
                    "(`trainyard status` shows it, the stack's log says why)"
                )
            for name, pid in info["pids"].items():
                if pid != before["pids"].get(name):
                    click.echo(f"{name} restarted (pid {pid})")
            click.echo("rolling restart finished")
            return
        time.sleep(0.2)
    raise click.ClickException(f"the rolling restart did not finish within {timeout:.0f}s")


@click.command()
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
def backup(archive: Path) -> None:
    """Write one consistent archive of the deployment to ARCHIVE while the stack runs:
    every row of its store, read in one snapshot, and every stored object, still
    encrypted, with a manifest of hashes. Restore it with `trainyard restore`."""
    from infra import backup as archives
    from infra import status as board

    private()  # the archive is the deployment's data
    config = Config.from_env()
    _stack_store(config).dispose()
    try:
        info = board.read_info(config.run_dir)
    except board.NoStack:
        info = None
    if archive.exists():
        raise click.UsageError("ARCHIVE exists already; name a new file")
    try:
        done = archives.backup(archives.with_object_store(config, info), archive, click.echo)
    except archives.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"backup written: {done.path} ({done.rows} rows at schema {done.revision}, "
        f"{done.objects} objects, {done.bytes} bytes)"
    )


@click.command()
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--master-key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The deployment's master key (its home's master.key); copied into the new home.",
)
def restore(archive: Path, master_key_file: Path | None) -> None:
    """Restore a `trainyard backup` archive into a new home (TRAINYARD_HOME, and
    TRAINYARD_DATABASE_URL when the store is PostgreSQL). The whole archive is checked
    first: a corrupt or cut-short one is refused and nothing is written. Then start the
    stack there with `make up`."""
    from infra import backup as archives
    from infra import status as board
    from services.core import keys

    private()
    config = Config.from_env()
    with contextlib.suppress(board.NoStack):
        board.read_info(config.run_dir)
        raise click.UsageError("a stack runs under this home: restore into a new home")
    if master_key_file is not None:
        master = keys.master_key(master_key_file)
    elif config.master_key_hex or config.master_key_path.exists():
        master = config.master_key()
    else:
        raise click.UsageError(
            "a restore needs the deployment's master key: --master-key-file (its home's "
            "master.key) or TRAINYARD_MASTER_KEY"
        )
    try:
        done = archives.restore(config, archive, master, click.echo)
    except archives.BackupError as exc:
        raise click.ClickException(str(exc)) from None
    if master_key_file is not None and not config.master_key_hex:
        keys.write_master_key(config.master_key_path, master)
    click.echo(
        f"restored into {config.home}: {done.rows} rows, {done.objects} objects; "
        "`make up` (or `trainyard up`) starts the stack there"
    )


# "\b" keeps click from rewrapping the table, so each role stays on its own line.
_CREATE_KEY_HELP = "\n".join(
    [
        "Create an API key and print it once; only its hash is stored.",
        "",
        "Each key acts in its own org; only platform and operator keys may act in another",
        "org (the x-org-id header), and each such call is on the audit trail.",
        "",
        "\b",
        "Roles:",
        *(f"  {role:<9} {line}" for role, line in auth.ROLE_HELP.items()),
    ]
)


def _stack_store(config: Config) -> Store:
    """The store of the stack this home holds; refused when there is none, since run
    elsewhere the command would make a new, empty store whose keys the stack rejects."""
    private()  # a database journal it makes holds the org's rows
    url = sa.engine.make_url(normalise_url(config.database_url))
    if url.get_backend_name() == "sqlite":
        found = bool(url.database) and Path(str(url.database)).is_file()
    else:
        engine = create_engine(config.database_url)
        try:
            found = sa.inspect(engine).has_table("jobs")
        finally:
            engine.dispose()
    if not found:
        raise click.UsageError(
            "no Trainyard store here: run this where `make up` runs (its home is "
            "TRAINYARD_HOME, ./.trainyard by default), or with the stack's "
            "TRAINYARD_HOME and TRAINYARD_DATABASE_URL"
        )
    return open_store(config.database_url)


@click.command("credit")
@click.option("--org", required=True, help="The org whose wallet is credited.")
@click.option("--amount", required=True, type=decimal.Decimal, help="US dollars, such as 25.00.")
@click.option(
    "--name", required=True, help="The credit's name (an invoice id): a repeat is one credit."
)
def credit(org: str, amount: decimal.Decimal, name: str) -> None:
    """Credit an org's wallet; the ledger records it once per name."""
    if not auth.ORG_PATTERN.match(org):
        raise click.UsageError("--org must be an org id")
    micro_cents = amount * 10**8
    if micro_cents != micro_cents.to_integral_value() or micro_cents <= 0:
        raise click.UsageError("--amount must be above 0 with at most 8 decimals")
    config = Config.from_env()
    store = _stack_store(config)
    try:
        with store.unit() as session:
            now = utcnow()
            wallet = ledger.wallet(session, org, free_cents=config.free_credit_cents, now=now)
            applied = ledger.post(
                session, wallet, f"credit/{name}", "credit", int(micro_cents), now=now
            )
            if applied:
                audit.record(
                    session,
                    "training.wallet.credited",
                    org=org,
                    subject=name,
                    actor="admin-cli",
                    micro_cents=int(micro_cents),
                )
            balance = wallet.balance
    finally:
        store.dispose()
    click.echo(f"{'credited' if applied else 'already credited'}; balance ${balance / 10**8:,.4f}")


@click.command("create-key", help=_CREATE_KEY_HELP)
@click.option("--org", required=True, help="The org the key belongs to.")
@click.option("--role", required=True, type=click.Choice(auth.ROLES), help="What the key may do.")
@click.option("--label", default="", help="A non-secret note about who holds it.")
@click.option(
    "--tinker",
    is_flag=True,
    help="Print it as TINKER_API_KEY for the official tinker SDK: `tml-` before the key.",
)
def create_key(org: str, role: str, label: str, tinker: bool) -> None:
    store = _stack_store(Config.from_env())
    try:
        with store.unit() as session:
            key_id, key = auth.create_key(session, org=org, role=role, label=label)
    except errors.DomainError as exc:
        raise click.UsageError(exc.message) from None
    finally:
        store.dispose()
    click.echo(f"tml-{key}" if tinker else key)
    click.echo(f"key id {key_id}, org {org}, role {role}; it is not shown again", err=True)


@click.command("revoke-key")
@click.argument("key_id")
def revoke_key(key_id: str) -> None:
    """Revoke an API key by the id `create-key` printed with it. The next call with it,
    through any service, is refused 401 as revoked."""
    store = _stack_store(Config.from_env())
    try:
        with store.unit() as session:
            found = auth.revoke_key(session, key_id)
    finally:
        store.dispose()
    if not found:
        raise click.UsageError("no key has this id")
    click.echo("revoked")
