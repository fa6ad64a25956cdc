"""The `trainyard` command line."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format
from google.protobuf.message import Message
from rich.progress import TextColumn

from services.core import auth, errors
from services.core.config import Config, ConfigError
from services.core.store import open_store
from trainyard import sdk, watch

FIXTURE_SPEC = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url", envvar="TRAINYARD_URL", default=sdk.DEFAULT_URL, show_default=True, help="The gateway."
)
@click.option(
    "--api-key", envvar="TRAINYARD_API_KEY", default="", help="Defaults to TRAINYARD_API_KEY."
)
@click.pass_context
def main(ctx: click.Context, url: str, api_key: str) -> None:
    """Trainyard: one endpoint for training."""
    ctx.obj = {"url": url, "api_key": api_key}


@contextmanager
def _client(ctx: click.Context) -> Iterator[sdk.Client]:
    """A client for the command; an API error ends the command with its reason."""
    client = sdk.Client(ctx.obj["url"], ctx.obj["api_key"])
    try:
        yield client
    except sdk.TrainyardError as exc:
        click.echo(f"error: {exc.reason}: {exc.message}", err=True)
        sys.exit(1)
    finally:
        client.close()


def _print(message: Message) -> None:
    click.echo(
        json.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True), indent=2)
    )


@main.command()
def up() -> None:
    """Start the whole stack on this machine (SQLite, SeaweedFS, the services, Envoy)."""
    from infra.stack import Stack

    try:
        config = Config.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(Stack(config).run())


@main.command()
@click.option("--machine", help="This machine's name (the host name by default).")
@click.option(
    "--devices", default="cpu", show_default=True, help="One entry per accelerator, e.g. cpu,cpu."
)
@click.option(
    "--platform", is_flag=True, help="Claim any org's jobs that name no machine (platform key)."
)
@click.option("--slots", default=1, show_default=True, help="Tasks run at once.")
@click.option(
    "--trainer",
    envvar="TRAINYARD_TRAINER",
    default="executor.train",
    show_default=True,
    help="The trainer module (executor.scripted emits events without a model).",
)
@click.option(
    "--work-dir", type=click.Path(file_okay=False, path_type=Path), help="Where tasks run."
)
@click.pass_context
def executor(
    ctx: click.Context, machine: str | None, devices: str, platform: bool, slots: int, trainer: str,
    work_dir: Path | None,
) -> None:  # fmt: skip
    """Run an executor: claim tasks, run their trainers, report, obey cancels."""
    import logging
    import os
    import signal

    from executor.agent import Agent, AgentConfig
    from services.core import logs

    logs.configure("executor", fmt=os.environ.get("TRAINYARD_LOG_FORMAT", "auto"))
    from services.jobs.catalog import Catalog

    config = AgentConfig(
        url=ctx.obj["url"],
        bases=tuple(Catalog.discover(Config.from_env().models_dir).names),
        api_key=ctx.obj["api_key"],
        devices=tuple(d.strip() for d in devices.split(",") if d.strip()),
        platform=platform,
        slots=slots,
        trainer=trainer,
        work_root=work_dir or Config.from_env().home / "executor",
        journal=Path(os.environ["TRAINYARD_EXECUTOR_JOURNAL"])
        if os.environ.get("TRAINYARD_EXECUTOR_JOURNAL")
        else None,
    )
    if machine:
        config.machine = machine
    agent = Agent(config)
    signal.signal(signal.SIGTERM, lambda *_: agent.stop())
    logging.getLogger(__name__).info("executor %s connecting to %s", config.machine, config.url)
    try:
        agent.run()
    except KeyboardInterrupt:
        agent.stop()


@main.group()
def admin() -> None:
    """Administer the deployment directly through its store."""


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


@admin.command("create-key", help=_CREATE_KEY_HELP)
@click.option("--org", required=True, help="The org the key belongs to.")
@click.option("--role", required=True, type=click.Choice(auth.ROLES), help="What the key may do.")
@click.option("--label", default="", help="A non-secret note about who holds it.")
def create_key(org: str, role: str, label: str) -> None:
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
@click.pass_context
def jobs_create(
    ctx: click.Context, spec_file: Path | None, fixture: bool, max_steps: int | None,
    idempotency_key: str | None, then_watch: bool,
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
        job = client.create_job(spec)
        if then_watch:
            click.echo(f"created {job.id} (number {job.number})", err=True)
            watch.watch(client.watch_job(job.id))
        else:
            _print(job)


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
                f"{job.progress.step}/{job.planned_steps}  {job.base_model}"
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
    if last is not None and last.status in ("failed", "stopped", "rejected"):
        sys.exit(3)


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
    click.echo(f"{artifact.sha256}  {artifact.size} bytes  {artifact.status}")
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
                f"{artifact.sha256}  {artifact.kind:<10} {artifact.size:>12}  {artifact.name}  {expires}"
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
