"""The `trainyard` command line."""

from __future__ import annotations

import json
import re
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format

from trainyard import (
    cli_compare,  # noqa: F401 (its command joins `jobs`)
    cli_job_outputs,  # noqa: F401 (its commands join `jobs`)
    cli_org,
    sdk,
)
from trainyard.channels import Tls
from trainyard.cli_base import bar as _bar
from trainyard.cli_base import client as _client
from trainyard.cli_base import dollars as _dollars
from trainyard.cli_base import exact_dollars as _exact_dollars
from trainyard.cli_base import print_message as _print
from trainyard.cli_jobs import jobs
from trainyard.cli_webhooks import webhooks


class _Commands(click.Group):
    """The user's commands, defined here over the SDK alone, and the operator's (`up`,
    `admin`, `executor`), defined beside what they operate and found by their entry point
    (`trainyard.commands`), imported only when named."""

    @staticmethod
    def _operated() -> dict[str, EntryPoint]:
        return {found.name: found for found in entry_points(group="trainyard.commands")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._operated()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        found = super().get_command(ctx, name)
        if found is None and (point := self._operated().get(name)) is not None:
            try:
                loaded = point.load()
            except ModuleNotFoundError:
                # The client alone lacks what the operator's commands run on; the entry
                # point names the extra that brings it.
                if not point.extras:
                    raise
                return _not_installed(f"{ctx.command_path} {name}", name, point.extras)
            return loaded if isinstance(loaded, click.Command) else None
        return found


def _not_installed(path: str, name: str, extras: list[str]) -> click.Command:
    """Stands in for an operator's command whose dependencies this install lacks: listed
    in the help, it says in one line which extra to install, whatever it is given."""
    wanted = f"pip install 'trainyard[{','.join(extras)}]'"
    noun = "extra" if len(extras) == 1 else "extras"

    def refuse() -> None:
        click.echo(f"{path} needs the {' and '.join(extras)} {noun}: {wanted}", err=True)
        click.get_current_context().exit(2)

    return click.Command(
        name,
        callback=refuse,
        short_help=f"Not installed here: {wanted}",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="TRAINYARD_URL",
    default=sdk.DEFAULT_URL,
    show_default=True,
    help="The gateway's URL; the TRAINYARD_URL environment variable sets it.",
)
@click.option(
    "--api-key",
    envvar="TRAINYARD_API_KEY",
    default="",
    help="The API key; the TRAINYARD_API_KEY environment variable sets it.",
)
@click.option(
    "--org",
    envvar="TRAINYARD_ORG",
    default="",
    help="The org an operator's key acts in (x-org-id); the key's own when unset.",
)
@click.option(
    "--ca-file",
    envvar="TRAINYARD_CA_FILE",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM CA certificates an https:// gateway is verified with (the system's when "
    "unset; verification is never off); TRAINYARD_CA_FILE sets it.",
)
@click.pass_context
def main(ctx: click.Context, url: str, api_key: str, org: str, ca_file: Path | None) -> None:
    """Trainyard: one endpoint for training.

    \b
    Exit codes: 0 done; 1 refused (the error's code and detail are printed); 2 a usage
    error; 3 a watched job ended failed, stopped or rejected; 4 no gateway answered.
    """
    ctx.obj = {"url": url, "api_key": api_key, "org": org, "tls": Tls(ca_file=ca_file)}


main.add_command(jobs)
main.add_command(webhooks)


class _ModelCommands(_Commands):
    """`models`' subcommands: `export` builds a built-in base with the executor's code, so
    it is defined there and found by its entry point (`trainyard.models`)."""

    @staticmethod
    def _operated() -> dict[str, EntryPoint]:
        return {found.name: found for found in entry_points(group="trainyard.models")}


@main.group(cls=_ModelCommands, invoke_without_command=True)
@click.pass_context
def models(ctx: click.Context) -> None:
    """List the bases this deployment trains, with their profiles; `export` writes a
    built-in one to disk."""
    if ctx.invoked_subcommand is not None:
        return
    with _client(ctx) as client:
        for model in client.models():
            _print(model)


class _AdminCommands(_Commands):
    """`admin`'s subcommands: `keys` works over the API, so an org's admin runs it from the
    client install; the operator's commands on the store (`create-key`, `revoke-key`,
    `credit`) are defined beside it and found by their entry point (`trainyard.admin`)."""

    @staticmethod
    def _operated() -> dict[str, EntryPoint]:
        return {found.name: found for found in entry_points(group="trainyard.admin")}


@main.group(cls=_AdminCommands)
def admin() -> None:
    """Administer the org's keys over the API (`keys`), or the deployment directly
    through its store (`create-key`, `revoke-key`, `credit`)."""


admin.add_command(cli_org.keys)
main.add_command(cli_org.audit)
main.add_command(cli_org.limits)


@main.group()
def clients() -> None:
    """Create, list, read and delete interactive training clients (drive them with the SDK's
    TrainingClient; see examples/train_client.py)."""


@clients.command("create")
@click.option("--base", "base_model", default="fixture-tiny-llm", show_default=True)
@click.option("--rank", type=int, help="LoRA rank; the base's default when omitted.")
@click.option("--seed", type=int, help="Seeds the adapter's initialisation.")
@click.option("--org", help="The org it is for (an operator key acting in it).")
@click.pass_context
def clients_create(
    ctx: click.Context, base_model: str, rank: int | None, seed: int | None, org: str | None
) -> None:
    """Create a client on an engine executor (in an engine process of its own); print it
    once loaded."""
    with _client(ctx) as client:
        made = client.create_training_client(base_model, rank=rank, seed=seed, org=org)
        _print(made.get())


@clients.command("list")
@click.option("--status", default="", help="Only clients in this status.")
@click.pass_context
def clients_list(ctx: click.Context, status: str) -> None:
    """List the org's clients, newest first."""
    with _client(ctx) as client:
        for found in client.list_training_clients(status=status):
            last = f"{found.loss_history[-1].loss:.4f}" if found.loss_history else "-"
            click.echo(
                f"{found.id}  {found.status:<8} {found.base_model}  step {found.step:<5} "
                f"seq {found.seq:<6} loss {last}  {_dollars(found.cost_micro_cents)}"
            )


@clients.command("get")
@click.argument("client_id")
@click.pass_context
def clients_get(ctx: click.Context, client_id: str) -> None:
    """Show one client as JSON, with its loss history."""
    with _client(ctx) as client:
        _print(client.training_client(client_id).get())


@clients.command("delete")
@click.argument("client_id")
@click.pass_context
def clients_delete(ctx: click.Context, client_id: str) -> None:
    """Drop a client and free its engine's memory."""
    with _client(ctx) as client:
        gone = client.training_client(client_id).delete()
        click.echo(f"{gone.id}  {gone.status}")


@main.command()
@click.pass_context
def wallet(ctx: click.Context) -> None:
    """The org's wallet: balance, what live holds commit, this month's spend, caps."""
    with _client(ctx) as client:
        found = client.wallet()
    click.echo(f"balance    {_dollars(found.balance_micro_cents)}")
    click.echo(f"held       {_dollars(found.held_micro_cents)} in {len(found.holds)} live holds")
    click.echo(f"available  {_dollars(found.available_micro_cents)}")
    cap = _dollars(found.spend_cap_micro_cents) if found.spend_cap_micro_cents else "none"
    click.echo(f"spent      {_dollars(found.spent_micro_cents)} this month (cap {cap})")
    click.echo(
        f"storage    {found.storage_bytes} bytes kept, "
        f"{_cents(found.storage_cost_per_month)} cents a month"
    )
    for hold in found.holds:
        click.echo(
            f"  {hold.job_id} {hold.task_id}  {hold.used_seconds}/{hold.held_seconds} "
            f"device-seconds on {hold.devices}  charged {_dollars(hold.charged_micro_cents)}"
        )


@main.command()
@click.option("--limit", default=25, show_default=True, help="At most this many entries.")
@click.pass_context
def ledger(ctx: click.Context, limit: int) -> None:
    """The org's ledger, newest first."""
    with _client(ctx) as client:
        for count, entry in enumerate(client.ledger(), start=1):
            click.echo(
                f"{entry.create_time.ToDatetime():%Y-%m-%d %H:%M:%S}  {entry.kind:<8} "
                f"{_exact_dollars(entry.micro_cents):>14}  {entry.job_id or '-':<20} {entry.name}"
            )
            if count >= limit:
                break


@main.command()
@click.option(
    "--revision", default="", help="The revision held: answers changed false while current."
)
@click.pass_context
def published(ctx: click.Context, revision: str) -> None:
    """List every org's published capabilities with download URLs valid 10 minutes; the
    platform's key only. Prints the revision, whether it changed, and the list."""
    with _client(ctx) as client:
        answer = client.published(revision=revision)
    data = [json_format.MessageToDict(p, preserving_proto_field_name=True) for p in answer.data]
    click.echo(
        json.dumps({"revision": answer.revision, "changed": answer.changed, "data": data}, indent=2)
    )


@main.group()
def artifacts() -> None:
    """Upload, list, download and delete the org's objects."""


@artifacts.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", help="A name for it; the file's name by default.")
@click.pass_context
def artifacts_upload(ctx: click.Context, file: Path, name: str | None) -> None:
    """Upload a dataset (chat or decision JSON Lines): hash, grant, PUT, and a read-back
    confirmation that refuses (and deletes) rows a job could not train on, naming the line."""
    with _client(ctx) as client, _bar("upload") as bar:
        task = bar.add_task("upload", total=file.stat().st_size)
        artifact = client.upload(
            file, name=name, progress=lambda done, total: bar.update(task, completed=done)
        )
    click.echo(f"{artifact.sha256}  {int(artifact.size)} bytes  {artifact.status}")
    click.echo(f"use it as dataset.uri artifact:{artifact.sha256}", err=True)


def _cents(value: float) -> str:
    """US cents, to three significant digits: a small object's month is a tiny fraction."""
    return "0" if value == 0 else f"{value:.3g}"


def _expiry(artifact: Any) -> str:
    if artifact.HasField("expire_time"):
        return f"{artifact.expire_time.ToDatetime():%Y-%m-%dT%H:%M:%SZ}"
    return "kept"


def _kept(artifact: Any) -> str:
    """One line on whether an object will expire, why not, and what it costs a month."""
    return (
        f"{artifact.sha256}  pinned {'yes' if artifact.pinned else 'no'}  "
        f"expires {_expiry(artifact)}  kept by {artifact.kept_by or '-'}  "
        f"{_cents(artifact.storage_cost_per_month)} cents a month"
    )


def _ttl(value: str) -> int:
    """`30d`, `12h`, `90m`, `3600s` or plain seconds."""
    found = re.fullmatch(r"(\d{1,10})([smhd]?)", value.strip())
    if not found:
        raise click.BadParameter("must be a count of seconds, or one with s, m, h or d")
    return int(found[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}[found[2]]


@artifacts.command("ls")
@click.option("--kind", default="", help="Only this kind.")
@click.pass_context
def artifacts_ls(ctx: click.Context, kind: str) -> None:
    """List the org's objects, newest first, under a header: each one's sha256, kind, size in
    bytes, when it expires (UTC; `kept` while nothing ends it or it is pinned), whether it
    is pinned, what it costs a month (US cents) and name."""
    with _client(ctx) as client:
        found = list(client.list_artifacts(kind=kind))
    click.echo(
        f"{'sha256':<64}  {'kind':<10} {'bytes':>12}  {'expires':<20}  {'pinned':<6}  "
        f"{'cents/month':>11}  name"
    )
    for artifact in found:
        click.echo(
            f"{artifact.sha256}  {artifact.kind:<10} {int(artifact.size):>12}  "
            f"{_expiry(artifact):<20}  {'yes' if artifact.pinned else 'no':<6}  "
            f"{_cents(artifact.storage_cost_per_month):>11}  {artifact.name}"
        )


@artifacts.command("pin")
@click.argument("sha256")
@click.pass_context
def artifacts_pin(ctx: click.Context, sha256: str) -> None:
    """Pin an object: it never expires, and no sweep deletes it, until it is unpinned."""
    with _client(ctx) as client:
        click.echo(_kept(client.pin_artifact(sha256)))


@artifacts.command("unpin")
@click.argument("sha256")
@click.pass_context
def artifacts_unpin(ctx: click.Context, sha256: str) -> None:
    """Unpin an object: its retention applies again."""
    with _client(ctx) as client:
        click.echo(_kept(client.unpin_artifact(sha256)))


@artifacts.command("extend")
@click.argument("sha256")
@click.option(
    "--ttl", required=True, help="Keep it this long from now: 30d, 12h, 90m, 3600s (or seconds)."
)
@click.pass_context
def artifacts_extend(ctx: click.Context, sha256: str, ttl: str) -> None:
    """Keep an object longer, without copying a byte: it expires TTL from now (never sooner
    than it would, at most its retention class's greatest TTL)."""
    seconds = _ttl(ttl)
    with _client(ctx) as client:
        click.echo(_kept(client.extend_artifact(sha256, seconds)))


@artifacts.command("get")
@click.argument("sha256")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Where to write it."
)
@click.pass_context
def artifacts_get(ctx: click.Context, sha256: str, output: Path | None) -> None:
    """Download an object and verify its sha256; first a line on whether it is pinned, when
    it expires, what keeps it and what it costs a month."""
    target = output or Path(sha256)
    with _client(ctx) as client, _bar("download") as bar:
        click.echo(_kept(client.get_artifact(sha256)))
        task = bar.add_task("download", total=None)
        client.download(
            sha256,
            target,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    click.echo(f"{target}  verified")


@artifacts.command("rm")
@click.argument("sha256")
@click.pass_context
def artifacts_rm(ctx: click.Context, sha256: str) -> None:
    """Delete an object, its metadata and provenance."""
    with _client(ctx) as client:
        client.delete_artifact(sha256)
    click.echo(f"{sha256}  deleted")


if __name__ == "__main__":
    main()
