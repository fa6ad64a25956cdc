"""`trainyard jobs dataset|metrics|logs|artifacts|provenance|download`: what a job trained
on and what it made, read and fetched. Registered on the `jobs` group of `cli_jobs`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from trainyard.cli_base import bar, client, print_message
from trainyard.cli_jobs import jobs
from trainyard.job.v1 import job_pb2


@jobs.command("dataset")
@click.argument("job_id")
@click.argument("item", required=False)
@click.option("--split", type=click.Choice(["all", "train", "eval"]), default="all")
@click.option("--search", default="", help="Only examples whose name or messages hold this.")
@click.option("--offset", default=0, help="Examples to skip.")
@click.option("--limit", default=25, show_default=True, help="Examples to show, at most 200.")
@click.pass_context
def jobs_dataset(
    ctx: click.Context,
    job_id: str,
    item: str | None,
    split: str,
    search: str,
    offset: int,
    limit: int,
) -> None:
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
@click.option(
    "--points",
    default=0,
    help="At most this many points a series (5 or more), keeping its shape and spikes; all when 0.",
)
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


@jobs.command("logs")
@click.argument("job_id")
@click.option("--attempt", type=int, help="The attempt's number (the latest by default).")
@click.option("-f", "--follow", is_flag=True, help="Go on printing what it writes until it ends.")
@click.option("--tail", type=int, default=0, help="Only the last this many lines (at most 10,000).")
@click.pass_context
def jobs_logs(
    ctx: click.Context, job_id: str, attempt: int | None, follow: bool, tail: int
) -> None:
    """An attempt's log: its trainer's standard output and error, whole, as the executor
    captured them; a crashed trainer's traceback ends it."""
    with client(ctx) as api:
        number = attempt or api.attempts(job_id)[-1].attempt_number
        for text in api.log_text(job_id, number, tail_lines=tail, follow=follow):
            click.echo(text, nl=False)


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
