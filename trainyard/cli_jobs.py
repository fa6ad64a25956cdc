"""`trainyard jobs`: create, estimate, read, watch, cancel, retry, publish and download
jobs, and read what they trained on and made. Registered on the `trainyard` group."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format

from trainyard import watch
from trainyard.cli_base import JOB_UNSUCCESSFUL, bar, client, dollars, print_message
from trainyard.job.v1 import job_pb2, job_service_pb2, publication_pb2

FIXTURE_SPEC = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}

SPEC_FORMAT = """\b
SPEC.json holds one JSON object: the job body `POST /v1/train/jobs` takes (the
README's "Jobs" section). Required: `base_model` (one `trainyard models` lists) and
`dataset.uri` (`fixture:synthetic-tiny-v1`, or `artifact:<sha256>` of an upload); a job
the platform runs also needs `resources.budget` (US cents). Every other setting is
expanded from the base's profile; an unknown field is refused, by name. For example:

\b
  {"base_model": "fixture-tiny-llm",
   "dataset": {"uri": "fixture:synthetic-tiny-v1"},
   "resources": {"budget": 100},
   "hyperparameters": {"max_steps": 20}}

\b
The gateway and key are trainyard's --url and --api-key (TRAINYARD_URL,
TRAINYARD_API_KEY)."""


@click.group()
def jobs() -> None:
    """Create, estimate, list, read, watch, cancel, retry, publish and download jobs."""


def _spec_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that spell a job body, shared by `create` and `estimate`."""
    options = [
        click.option(
            "-f",
            "--file",
            "spec_file",
            metavar="SPEC.json",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="The job body as JSON (format below).",
        ),
        click.option(
            "--fixture", is_flag=True, help="The built-in fixture model on the built-in dataset."
        ),
        click.option("--max-steps", type=int, help="Train at most this many steps."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _spec(spec_file: Path | None, fixture: bool, max_steps: int | None) -> dict[str, Any]:
    """The body the options spell; a file that is not a JSON object is a usage error that
    names where it stops parsing, never what it holds."""
    if bool(spec_file) == fixture:
        raise click.UsageError("give exactly one of -f SPEC.json or --fixture")
    loaded: Any = dict(FIXTURE_SPEC)
    if spec_file:
        try:
            loaded = json.loads(spec_file.read_bytes())
        except ValueError as exc:  # JSONDecodeError, or bytes that are not text
            where = (
                f" at line {exc.lineno} column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else ""
            )
            raise click.BadParameter(f"is not JSON{where}", param_hint="-f") from None
        if not isinstance(loaded, dict):
            raise click.BadParameter("must hold a JSON object", param_hint="-f")
    spec: dict[str, Any] = loaded
    if max_steps is not None:
        spec.setdefault("hyperparameters", {})["max_steps"] = max_steps
    return spec


@jobs.command("create", epilog=SPEC_FORMAT)
@_spec_options
@click.option(
    "--key",
    "idempotency_key",
    help="An idempotency key: the same key makes the create safe to repeat.",
)
@click.option("--watch", "then_watch", is_flag=True, help="Watch the job after creating it.")
@click.option("--yes", is_flag=True, help="Create without asking, whatever the estimate.")
@click.option(
    "-q", "--quiet", is_flag=True,
    help="Print only the job's id (for JOB=$(…)); with --watch, its progress goes to stderr.",
)  # fmt: skip
@click.pass_context
def jobs_create(
    ctx: click.Context, spec_file: Path | None, fixture: bool, max_steps: int | None,
    idempotency_key: str | None, then_watch: bool, yes: bool, quiet: bool,
) -> None:  # fmt: skip
    """Create a job from a JSON spec file (-f SPEC.json), or the fixture job (--fixture).
    A job the platform charges for shows its price and asks first; prints the job."""
    spec = _spec(spec_file, fixture, max_steps)
    if idempotency_key:
        spec["idempotency_key"] = idempotency_key
    with client(ctx) as api:
        estimate = api.estimate_job(spec)
        if estimate.expected.micro_cents:  # a job the platform runs, charged to the wallet
            click.echo(
                f"expected {dollars(estimate.expected.micro_cents)} for "
                f"{estimate.expected.device_seconds:.0f} device-seconds, at most "
                f"{dollars(estimate.authorization_ceiling.micro_cents)} authorized; "
                f"the budget caps it at {dollars(estimate.job.resources.budget * 10**6)}",
                err=True,
            )
            if not yes and not click.confirm("Create it?", err=True):
                raise click.Abort()
        job = api.create_job(spec)
        if not then_watch:
            if quiet:
                click.echo(job.id)
            else:
                print_message(job)
            return
        click.echo(f"created {job.id} (number {job.number})", err=True)
        last = watch.watch(api.watch_job(job.id), out=sys.stderr if quiet else None)
    if quiet:
        click.echo(job.id)
    _exit_for(last)


@jobs.command("estimate", epilog=SPEC_FORMAT)
@_spec_options
@click.option("--json", "as_json", is_flag=True, help="The whole answer, with the frozen job.")
@click.pass_context
def jobs_estimate(
    ctx: click.Context, spec_file: Path | None, fixture: bool, max_steps: int | None, as_json: bool
) -> None:
    """Weigh a job body as `create` would, creating nothing: its plan, its dataset, its
    projected duration against the limit, and its price. Exits 1 with the refusal a
    create would meet."""
    spec = _spec(spec_file, fixture, max_steps)
    with client(ctx) as api:
        answer = api.estimate_job(spec)
    if as_json:
        print_message(answer)
        return
    for line in _estimate_lines(answer):
        click.echo(line)


def _estimate_lines(answer: job_service_pb2.EstimateJobResponse) -> list[str]:
    job, data, time = answer.job, answer.dataset, answer.duration_components
    lines = [
        f"plan       {job.planned_steps} steps ({job.steps_per_epoch} an epoch), batch "
        f"{job.effective_batch_size}; {job.train_examples} train / {job.eval_examples} eval "
        "examples",
        f"dataset    {data.selected_chats} examples, {data.selected_messages} messages; "
        f"{data.trainable_chats} trainable" + ("" if data.is_trainable else " (not trainable)"),
        f"duration   {time.projected_active_seconds:,.0f} s projected "
        f"({time.workload_seconds:,.0f} s training + {time.post_processing_tolerance_seconds:,.0f} s "
        f"tolerance) of {time.execution_limit_seconds:,.0f} s allowed: "
        + ("admitted" if answer.admitted else "a create is refused (DURATION_EXCEEDS_LIMIT)"),
    ]
    if answer.expected.micro_cents:
        budget = job.resources.budget if job.resources.HasField("budget") else None
        lines.append(
            f"price      {dollars(answer.expected.micro_cents)} expected for "
            f"{answer.expected.device_seconds:,.0f} device-seconds, at most "
            f"{dollars(answer.authorization_ceiling.micro_cents)} authorized"
            + (f"; the budget caps it at {dollars(budget * 10**6)}" if budget is not None else "")
        )
    else:
        lines.append("price      none: it runs on the org's own machines")
    return lines


@jobs.command("list")
@click.option("--status", default="", help="Only jobs in this status.")
@click.option("--project", default="", help="Only jobs of this project.")
@click.option("--limit", default=25, show_default=True, help="At most this many jobs.")
@click.pass_context
def jobs_list(ctx: click.Context, status: str, project: str, limit: int) -> None:
    """List jobs, newest first."""
    with client(ctx) as api:
        for count, job in enumerate(api.list_jobs(status=status, project=project), start=1):
            click.echo(
                f"{job.id}  #{job.number:<4} {job.project:<14} {job.status:<11} "
                f"{job.progress.step}/{job.planned_steps}  {job.base_model}  "
                f"{dollars(job.cost_credits)}"
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
    with client(ctx) as api:
        print_message(api.get_job(job_id, by_number=by_number, project=project))


@jobs.command("cancel")
@click.argument("job_id")
@click.pass_context
def jobs_cancel(ctx: click.Context, job_id: str) -> None:
    """Cancel a job (a running one saves what it trained)."""
    with client(ctx) as api:
        job = api.cancel_job(job_id)
        click.echo(watch.describe(job))


@jobs.command("retry")
@click.argument("job_id")
@click.option("--key", "idempotency_key", help="Idempotency key; a new one when omitted.")
@click.option("--resume", is_flag=True, help="Continue from the last verified checkpoint.")
@click.pass_context
def jobs_retry(ctx: click.Context, job_id: str, idempotency_key: str | None, resume: bool) -> None:
    """Start a new attempt of a succeeded, failed or cancelled job."""
    key = idempotency_key or str(uuid.uuid4())
    with client(ctx) as api:
        answer = api.retry_job(job_id, idempotency_key=key, resume_from_checkpoint=resume)
        click.echo(
            f"attempt {answer.attempt.attempt_number} of {job_id} ({answer.attempt.status}); key {key}"
        )


@jobs.command("watch")
@click.argument("job_id")
@click.pass_context
def jobs_watch(ctx: click.Context, job_id: str) -> None:
    """Follow a job live until it ends."""
    with client(ctx) as api:
        last = watch.watch(api.watch_job(job_id))
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
    with client(ctx) as api:
        while True:
            page = api.events(job_id, after=after)
            for event in page.events:
                click.echo(
                    json.dumps(json_format.MessageToDict(event, preserving_proto_field_name=True))
                )
            if not page.events:
                break
            after = page.next_after


@jobs.command("dataset")
@click.argument("job_id")
@click.argument("item", required=False)
@click.option("--split", type=click.Choice(["all", "train", "eval"]), default="all")
@click.option("--search", default="", help="Only examples whose name or messages hold this.")
@click.option("--offset", default=0, help="Examples to skip.")
@click.option("--limit", default=25, show_default=True, help="Examples to show, at most 200.")
@click.pass_context
def jobs_dataset(
    ctx: click.Context, job_id: str, item: str | None, split: str, search: str, offset: int,
    limit: int,
) -> None:  # fmt: skip
    """The examples a job trained on, from its frozen snapshot: each with its split and its
    first messages (cut to 300 characters). With ITEM, that one example's messages whole."""
    with client(ctx) as api:
        if item:
            found = api.dataset_item(job_id, item)
            click.echo(_item_line(found))
            for message in found.messages:
                click.echo(f"[{message.role}]\n{message.content}")
            return
        page = api.dataset_items(job_id, offset=offset, limit=limit, search=search, split=split)
    for shown in page.items:
        click.echo(_item_line(shown))
        for message in shown.messages:
            click.echo(f"  {message.role:<9}  {' '.join(message.content.split())}")
        if len(shown.messages) < shown.message_count:
            click.echo(f"  … {shown.message_count - len(shown.messages)} more")
    total = f" of {page.total}" if page.HasField("total") else ""
    after = f"; next: --offset {page.next_offset}" if page.HasField("next_offset") else ""
    click.echo(f"{_count(len(page.items), 'example')}{total} ({page.split}){after}", err=True)


def _item_line(item: job_pb2.DatasetItem) -> str:
    return f"{item.id}  {item.split:<5}  {_count(item.message_count, 'message')}  {item.name}"


@jobs.command("metrics")
@click.argument("job_id")
@click.option("--name", "names", multiple=True, help="Only this series (loss, eval_loss, …).")
@click.option("--points", default=0, help="At most this many points a series (5 or more), "
              "keeping its shape and spikes; all when 0.")  # fmt: skip
@click.pass_context
def jobs_metrics(ctx: click.Context, job_id: str, names: tuple[str, ...], points: int) -> None:
    """A job's metric series: each as a one-line chart, then a table of step and value."""
    with client(ctx) as api:
        series = api.metrics(job_id, *names, max_points=points)
    if not series:
        click.echo("no metrics reported yet", err=True)
    for one in series:
        values = [p.value for p in one.points]
        click.echo(f"{one.name}  {_count(len(values), 'point')}  {_spark(values)}")
        click.echo(f"{'step':>7}  value")
        for point in one.points:
            click.echo(f"{point.step:>7}  {point.value:.6g}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _spark(values: Sequence[float], width: int = 60) -> str:
    """The series as a row of block characters, at most `width` long."""
    if len(values) > width:
        values = [values[i * len(values) // width] for i in range(width)]
    if not values:
        return ""
    low, high = min(values), max(values)
    bars = "▁▂▃▄▅▆▇█"
    span = (high - low) or 1.0
    return "".join(bars[round((v - low) / span * (len(bars) - 1))] for v in values)


@jobs.command("artifacts")
@click.argument("job_id")
@click.pass_context
def jobs_artifacts(ctx: click.Context, job_id: str) -> None:
    """The objects a job holds (its result, saved state, snapshot): sha256, kind, size,
    name and until when it is kept."""
    with client(ctx) as api:
        found = api.job_artifacts(job_id)
    for artifact in found:
        kept = artifact.expires_at.ToJsonString() if artifact.HasField("expires_at") else "kept"
        click.echo(
            f"{artifact.sha256}  {artifact.kind:<10} {int(artifact.size):>12}  "
            f"{artifact.name}  {kept}"
        )
    click.echo(
        f"`trainyard jobs download {job_id}` unpacks the result; "
        "`trainyard artifacts get SHA256` fetches any one",
        err=True,
    )


@jobs.command("provenance")
@click.argument("job_id")
@click.pass_context
def jobs_provenance(ctx: click.Context, job_id: str) -> None:
    """The provenance record of a job's result as JSON: the base, dataset and config
    sha256s it was made from, and what made it."""
    with client(ctx) as api:
        print_message(api.provenance(job_id))


@jobs.command("download")
@click.argument("job_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="The directory to unpack into, new or empty; ./JOB_ID (./JOB_ID-state with "
    "--state) by default.",
)
@click.option(
    "--state", is_flag=True, help="The job's resumable training state instead of its result."
)
@click.pass_context
def jobs_download(ctx: click.Context, job_id: str, output: Path | None, state: bool) -> None:
    """Download a job's result (its model: weights, config, tokenizer, probe), check its
    sha256 and unpack it into a directory. Exits 1 with RESULT_UNAVAILABLE (or
    CHECKPOINT_UNAVAILABLE with --state) while the job has none, and with ARTIFACT_MISMATCH
    when the bytes do not verify; a failed download leaves no directory."""
    target = output or Path(f"{job_id}-state" if state else job_id)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise click.BadParameter(f"{target} exists and is not empty", param_hint="-o")
    with client(ctx) as api, bar("download") as shown:
        task = shown.add_task("download", total=None)
        api.download_job(
            job_id,
            target,
            state=state,
            progress=lambda done, total: shown.update(task, completed=done, total=total),
        )
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    click.echo(f"{target}  verified, {len(files)} files: {', '.join(files)}")


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
    with client(ctx) as api:
        print_message(api.publish_job(job_id, name=name, force=force, route=asked))
