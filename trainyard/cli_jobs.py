"""`trainyard jobs`: create, estimate, read, watch, cancel, retry and publish jobs.
Registered on the `trainyard` group; what a job trained on and made is read by the
commands in `cli_job_outputs`, on the same group."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from google.protobuf import json_format

from trainyard import watch
from trainyard.cli_base import JOB_UNSUCCESSFUL, client, dollars, exact_dollars, print_message
from trainyard.job.v1 import job_service_pb2, publication_pb2

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


class _NotStrict(Exception):
    """JSON Python reads but RFC 8259 and the gateway do not: NaN, Infinity, a key twice."""


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _NotStrict("a key appears twice in one object")
    return dict(pairs)


def _no_constant(_: str) -> Any:
    raise _NotStrict("NaN and Infinity are not JSON numbers")


def _spec(spec_file: Path | None, fixture: bool, max_steps: int | None) -> dict[str, Any]:
    """The body the options spell; a file that is not a JSON object is a usage error that
    names where it stops parsing, never what it holds."""
    if bool(spec_file) == fixture:
        raise click.UsageError("give exactly one of -f SPEC.json or --fixture")
    loaded: Any = dict(FIXTURE_SPEC)
    if spec_file:
        try:
            loaded = json.loads(
                spec_file.read_bytes(), object_pairs_hook=_once, parse_constant=_no_constant
            )
        except _NotStrict as exc:
            raise click.BadParameter(f"is not JSON: {exc}", param_hint="-f") from None
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
    "-q",
    "--quiet",
    is_flag=True,
    help="Print only the job's id (for JOB=$(…)); with --watch, its progress goes to stderr.",
)
@click.pass_context
def jobs_create(
    ctx: click.Context,
    spec_file: Path | None,
    fixture: bool,
    max_steps: int | None,
    idempotency_key: str | None,
    then_watch: bool,
    yes: bool,
    quiet: bool,
) -> None:
    """Create a job from a JSON spec file (-f SPEC.json), or the fixture job (--fixture).
    A job the platform charges for shows its price and asks first; prints the job."""
    spec = _spec(spec_file, fixture, max_steps)
    if idempotency_key:
        spec["idempotency_key"] = idempotency_key
    with client(ctx) as api:
        estimate = api.estimate_job(spec)
        # A job the platform runs is charged to the wallet: its price is asked about, unless
        # the create is refused anyway (its refusal is then printed, without a question).
        if estimate.expected.micro_cents and not _create_refusal(estimate):
            click.echo(price_line(estimate, prompt=True), err=True)
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
    else:
        for line in _estimate_lines(answer):
            click.echo(line)
    if refusal := _create_refusal(answer):
        click.echo(f"error: {refusal}", err=True)
        ctx.exit(1)


def _create_refusal(answer: job_service_pb2.EstimateJobResponse) -> str:
    """The refusal a create of the estimated body would meet, as its error line; empty
    when a create would be admitted."""
    if not answer.dataset.is_trainable:
        return f"{', '.join(answer.dataset.reasons)}: the dataset cannot train."
    if not answer.admitted:
        return "DURATION_EXCEEDS_LIMIT: the projected duration is over the limit."
    if answer.expected.micro_cents and not answer.job.resources.HasField("budget"):
        return (
            "BUDGET_REQUIRED: Field resources.budget is required for a job the platform "
            "runs (US cents)."
        )
    return ""


def _estimate_lines(answer: job_service_pb2.EstimateJobResponse) -> list[str]:
    job, data, time = answer.job, answer.dataset, answer.duration_components
    lines = [
        f"plan       {job.planned_steps} steps ({job.steps_per_epoch} an epoch), batch "
        f"{job.effective_batch_size}; {job.train_examples} train / {job.eval_examples} eval "
        "examples",
        f"dataset    {data.selected_chats} examples, {data.selected_messages} messages; "
        f"{data.trainable_chats} trainable"
        + ("" if data.is_trainable else f": a create is refused ({', '.join(data.reasons)})"),
        f"duration   {time.projected_active_seconds:,.0f} s projected "
        f"({time.workload_seconds:,.0f} s training + {time.post_processing_tolerance_seconds:,.0f} s "
        f"tolerance) of {time.execution_limit_seconds:,.0f} s allowed: "
        + (
            "admitted"
            if answer.admitted
            else "a create is refused (TRAINING_DURATION_EXCEEDS_LIMIT)"
        ),
    ]
    if answer.expected.micro_cents:
        lines.append(f"price      {price_line(answer)}")
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
                f"{dollars(job.cost_micro_cents)}"
            )
            if count >= limit:
                break


@jobs.command("get")
@click.argument("job_id")
@click.option("--number", "by_number", is_flag=True, help="JOB_ID is the job's number.")
@click.option("--project", default="", help="With --number: the project.")
@click.pass_context
def jobs_get(ctx: click.Context, job_id: str, by_number: bool, project: str) -> None:
    """Show one job as JSON; a job waiting for an executor says where it stands on stderr
    (`queued: position 2 of 3, starts in about 40 s`)."""
    with client(ctx) as api:
        job = api.get_job(job_id, by_number=by_number, project=project)
    print_message(job)
    if waiting := watch.queue_line(job):
        click.echo(waiting, err=True)


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


def price_line(answer: job_service_pb2.EstimateJobResponse, *, prompt: bool = False) -> str:
    """What a platform job will most likely cost and on which device class, what its
    authorization holds at most, and its budget: as a stop only where the expected price
    reaches it. A create's prompt leads with the word, an estimate's line with the amount."""
    expected = answer.expected
    amount = exact_dollars(expected.micro_cents)
    line = (
        (f"expected {amount} for" if prompt else f"{amount} expected for")
        + f" {expected.device_seconds:,.0f} device-seconds on {answer.device_class or 'gpu'}, at most "
        f"{dollars(answer.authorization_ceiling.micro_cents)} held while it runs"
    )
    resources = answer.job.resources
    if not resources.HasField("budget"):
        return line
    budget = resources.budget * 10**6
    if expected.micro_cents < budget:
        return f"{line}; budget {dollars(budget)}"
    return f"{line}; its budget of {dollars(budget)} stops it before that"
