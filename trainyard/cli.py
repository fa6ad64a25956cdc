"""The `trainyard` command line."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format
from google.protobuf.message import Message
from rich.progress import TextColumn

from trainyard import sdk, watch
from trainyard.job.v1 import publication_pb2

FIXTURE_SPEC = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}


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
            loaded = point.load()
            return loaded if isinstance(loaded, click.Command) else None
        return found


# Exit codes, as `trainyard --help` lists them.
REFUSED, JOB_UNSUCCESSFUL, UNREACHABLE = 1, 3, 4


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="TRAINYARD_URL",
    default=sdk.DEFAULT_URL,
    show_default=True,
    help="The gateway; defaults to TRAINYARD_URL.",
)
@click.option(
    "--api-key", envvar="TRAINYARD_API_KEY", default="", help="Defaults to TRAINYARD_API_KEY."
)
@click.pass_context
def main(ctx: click.Context, url: str, api_key: str) -> None:
    """Trainyard: one endpoint for training.

    \b
    Exit codes: 0 done; 1 refused (the error's code and detail are printed); 2 a usage
    error; 3 a watched job ended failed, stopped or rejected; 4 no gateway answered.
    """
    ctx.obj = {"url": url, "api_key": api_key}


@contextmanager
def _client(ctx: click.Context) -> Iterator[sdk.Client]:
    """A client for the command; an API error ends the command with its reason."""
    client = sdk.Client(ctx.obj["url"], ctx.obj["api_key"])
    try:
        yield client
    except sdk.TrainyardError as exc:
        if not exc.answered:
            click.echo(
                f"error: no gateway answered at {ctx.obj['url']}; `make up` starts the stack "
                "(or set --url / TRAINYARD_URL to where it runs)",
                err=True,
            )
            sys.exit(UNREACHABLE)
        click.echo(f"error: {exc.reason}: {exc.message}", err=True)
        sys.exit(REFUSED)
    finally:
        client.close()


# Byte sizes and parameter counts are proto doubles so REST writes them as JSON numbers;
# Python's JSON would print them as `17000.0`, so the CLI writes them as the gateway does.
_WHOLE = frozenset({"size", "parameters"})


def _whole(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: int(v) if k in _WHOLE and isinstance(v, float) and v.is_integer() else _whole(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def _print(message: Message) -> None:
    as_dict = json_format.MessageToDict(message, preserving_proto_field_name=True)
    click.echo(json.dumps(_whole(as_dict), indent=2))


@main.command()
@click.pass_context
def models(ctx: click.Context) -> None:
    """List the bases this deployment trains, with their profiles."""
    with _client(ctx) as client:
        for model in client.models():
            _print(model)


@main.group()
def jobs() -> None:
    """Create, list, read, watch, cancel and retry jobs."""


@jobs.command("create")
@click.option(
    "-f", "--file", "spec_file", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--fixture", is_flag=True, help="The built-in fixture model on the built-in dataset.")
@click.option("--max-steps", type=int, help="Train at most this many steps.")
@click.option(
    "--key",
    "idempotency_key",
    help="An idempotency key: the same key makes the create safe to repeat.",
)
@click.option("--watch", "then_watch", is_flag=True, help="Watch the job after creating it.")
@click.option("--yes", is_flag=True, help="Create without asking, whatever the estimate.")
@click.pass_context
def jobs_create(
    ctx: click.Context, spec_file: Path | None, fixture: bool, max_steps: int | None,
    idempotency_key: str | None, then_watch: bool, yes: bool,
) -> None:  # fmt: skip
    """Create a job from a JSON spec file, or the fixture job."""
    if bool(spec_file) == fixture:
        raise click.UsageError("give exactly one of -f SPEC.json or --fixture")
    spec: dict[str, Any] = json.loads(spec_file.read_text()) if spec_file else dict(FIXTURE_SPEC)
    if not isinstance(spec, dict):
        raise click.UsageError("the spec file must hold a JSON object")
    if max_steps is not None:
        spec.setdefault("hyperparameters", {})["max_steps"] = max_steps
    if idempotency_key:
        spec["idempotency_key"] = idempotency_key
    with _client(ctx) as client:
        estimate = client.estimate_job(spec)
        if estimate.expected.micro_cents:  # a job the platform runs, charged to the wallet
            click.echo(
                f"expected {_dollars(estimate.expected.micro_cents)} for "
                f"{estimate.expected.device_seconds:.0f} device-seconds, at most "
                f"{_dollars(estimate.authorization_ceiling.micro_cents)} authorized; "
                f"the budget caps it at {_dollars(estimate.job.resources.budget * 10**6)}",
                err=True,
            )
            if not yes and not click.confirm("Create it?", err=True):
                raise click.Abort()
        job = client.create_job(spec)
        if not then_watch:
            _print(job)
            return
        click.echo(f"created {job.id} (number {job.number})", err=True)
        last = watch.watch(client.watch_job(job.id))
    _exit_for(last)


def _dollars(micro_cents: int) -> str:
    sign = "-" if micro_cents < 0 else ""
    return f"{sign}${abs(micro_cents) / 10**8:,.4f}"


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
    """Create a client on an engine executor (an operator's); print it once loaded."""
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
                f"{_dollars(entry.micro_cents):>14}  {entry.job_id or '-':<20} {entry.name}"
            )
            if count >= limit:
                break


@jobs.command("list")
@click.option("--status", default="", help="Only jobs in this status.")
@click.option("--project", default="", help="Only jobs of this project.")
@click.option("--limit", default=25, show_default=True, help="At most this many jobs.")
@click.pass_context
def jobs_list(ctx: click.Context, status: str, project: str, limit: int) -> None:
    """List jobs, newest first."""
    with _client(ctx) as client:
        for count, job in enumerate(client.list_jobs(status=status, project=project), start=1):
            click.echo(
                f"{job.id}  #{job.number:<4} {job.project:<14} {job.status:<11} "
                f"{job.progress.step}/{job.planned_steps}  {job.base_model}  "
                f"{_dollars(job.cost_credits)}"
            )
            if count >= limit:
                break


@jobs.command("get")
@click.argument("job_id")
@click.option("--number", "by_number", is_flag=True, help="JOB_ID is the job's number.")
@click.option("--project", default="", help="With --number: the project.")
@click.pass_context
def jobs_get(ctx: click.Context, job_id: str, by_number: bool, project: str) -> None:
    """Show one job as JSON."""
    with _client(ctx) as client:
        _print(client.get_job(job_id, by_number=by_number, project=project))


@jobs.command("cancel")
@click.argument("job_id")
@click.pass_context
def jobs_cancel(ctx: click.Context, job_id: str) -> None:
    """Cancel a job (a running one saves what it trained)."""
    with _client(ctx) as client:
        job = client.cancel_job(job_id)
        click.echo(watch.describe(job))


@jobs.command("retry")
@click.argument("job_id")
@click.option("--key", "idempotency_key", help="Idempotency key; a new one when omitted.")
@click.option("--resume", is_flag=True, help="Continue from the last verified checkpoint.")
@click.pass_context
def jobs_retry(ctx: click.Context, job_id: str, idempotency_key: str | None, resume: bool) -> None:
    """Start a new attempt of a succeeded, failed or cancelled job."""
    key = idempotency_key or str(uuid.uuid4())
    with _client(ctx) as client:
        answer = client.retry_job(job_id, idempotency_key=key, resume_from_checkpoint=resume)
        click.echo(
            f"attempt {answer.attempt.attempt_number} of {job_id} ({answer.attempt.status}); key {key}"
        )


@jobs.command("watch")
@click.argument("job_id")
@click.pass_context
def jobs_watch(ctx: click.Context, job_id: str) -> None:
    """Follow a job live until it ends."""
    with _client(ctx) as client:
        last = watch.watch(client.watch_job(job_id))
    _exit_for(last)


def _exit_for(last: Any) -> None:
    """A watched job that ended unsuccessfully exits non-zero."""
    if last is not None and last.status in ("failed", "stopped", "rejected"):
        sys.exit(JOB_UNSUCCESSFUL)


@jobs.command("events")
@click.argument("job_id")
@click.option("--after", default=0, help="Only events after this seq.")
@click.pass_context
def jobs_events(ctx: click.Context, job_id: str, after: int) -> None:
    """Print a job's events as JSON lines."""
    with _client(ctx) as client:
        while True:
            page = client.events(job_id, after=after)
            for event in page.events:
                click.echo(
                    json.dumps(json_format.MessageToDict(event, preserving_proto_field_name=True))
                )
            if not page.events:
                break
            after = page.next_after


def _route(keys: tuple[str, ...], options: tuple[str, ...], route: str | None) -> Any:
    """The route the options spell, or None when they spell none."""
    if route is not None:
        if keys or options:
            raise click.UsageError("--route replaces --key and --option; give one or the other.")
        try:
            parsed = json.loads(route)
        except ValueError:
            raise click.BadParameter("is not JSON", param_hint="--route") from None
        try:
            return json_format.ParseDict(parsed, publication_pb2.Route())
        except (json_format.ParseError, TypeError, AttributeError):
            raise click.BadParameter("is not a route", param_hint="--route") from None
    narrowed: dict[str, dict[str, Any]] = {}
    for text in options:
        key, has_key, rest = text.partition("=")
        kind, has_kind, labels = rest.partition(":")
        if not (has_key and has_kind):
            raise click.BadParameter("must be KEY=TYPE:LABEL,LABEL", param_hint="--option")
        narrowed[key] = {"type": kind, "labels": labels.split(",") if labels else []}
    if not keys and not narrowed:
        return None
    return {"keys": list(dict.fromkeys([*keys, *narrowed])), "options": narrowed}


@jobs.command("publish")
@click.argument("job_id")
@click.option("--name", default="", help="The published name; the output's name when omitted.")
@click.option("--force", is_flag=True, help="Publish a rejected job's output (recorded as forced).")
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="A question key the capability answers; repeat for each (1 to 64).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=TYPE:LABEL,LABEL",
    help="Narrow KEY (added to the keys) to one question: its type (choice, score or noul) "
    "and its labels, in order. Repeat for each key.",
)
@click.option(
    "--route",
    metavar="JSON",
    help='The whole route instead of --key/--option, for keys or labels holding "=", ":" '
    'or ",": {"keys": ["topic"], "options": {"topic": {"type": "choice", "labels": ["a"]}}}.',
)
@click.pass_context
def jobs_publish(
    ctx: click.Context,
    job_id: str,
    name: str,
    force: bool,
    keys: tuple[str, ...],
    options: tuple[str, ...],
    route: str | None,
) -> None:
    """Publish a succeeded job's output under a name of the org; a name published before
    moves to this job. A capability is published with the questions it answers (a route),
    any other output without one. Prints the publication.

    \b
    trainyard jobs publish job_… --key spam
    trainyard jobs publish job_… --name triage --option topic=choice:billing,bug,other
    """
    asked = _route(keys, options, route)
    with _client(ctx) as client:
        _print(client.publish_job(job_id, name=name, force=force, route=asked))


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


def _bar(label: str) -> Any:
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        disable=not sys.stderr.isatty(),
    )


@artifacts.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", help="A name for it; the file's name by default.")
@click.pass_context
def artifacts_upload(ctx: click.Context, file: Path, name: str | None) -> None:
    """Upload chat JSON Lines: hash, grant, PUT, read-back confirmation."""
    with _client(ctx) as client, _bar("upload") as bar:
        task = bar.add_task("upload", total=file.stat().st_size)
        artifact = client.upload(
            file, name=name, progress=lambda done, total: bar.update(task, completed=done)
        )
    click.echo(f"{artifact.sha256}  {int(artifact.size)} bytes  {artifact.status}")
    click.echo(f"use it as dataset.uri artifact:{artifact.sha256}", err=True)


@artifacts.command("ls")
@click.option("--kind", default="", help="Only this kind.")
@click.pass_context
def artifacts_ls(ctx: click.Context, kind: str) -> None:
    """List the org's objects, newest first."""
    with _client(ctx) as client:
        for artifact in client.list_artifacts(kind=kind):
            expires = (
                artifact.expires_at.ToJsonString() if artifact.HasField("expires_at") else "kept"
            )
            click.echo(
                f"{artifact.sha256}  {artifact.kind:<10} {int(artifact.size):>12}  {artifact.name}  {expires}"
            )


@artifacts.command("get")
@click.argument("sha256")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Where to write it."
)
@click.pass_context
def artifacts_get(ctx: click.Context, sha256: str, output: Path | None) -> None:
    """Download an object and verify its sha256."""
    target = output or Path(sha256)
    with _client(ctx) as client, _bar("download") as bar:
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
