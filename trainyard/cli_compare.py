"""`trainyard jobs compare`: a few jobs side by side, where their frozen configs differ
and how each ran, as two tables. Registered on the `jobs` group of `cli_jobs`."""

from __future__ import annotations

import json
from typing import Any

import click
from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from trainyard.cli_base import client, exact_dollars
from trainyard.cli_jobs import jobs
from trainyard.sdk_compare import Comparison, checked_ids

NONE = "—"


def shown(value: Any) -> str:
    """A config value as a cell: a float as short as it reads exactly, a list or a flag
    as JSON, nothing as a dash."""
    if value is None:
        return NONE
    if isinstance(value, bool | list | dict):
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def _loss(value: float | None, step: int | None = None) -> str:
    if value is None:
        return NONE
    return f"{value:.4f}" + (f" @ {step}" if step is not None else "")


def config_table(comparison: Comparison, *, every: bool = False) -> Table:
    """A row per config path the jobs do not share, a column per job; with `every`, a
    row per path, those that differ marked `*` (and in colour on a terminal)."""
    table = Table(title="Config", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("path", style="bold", no_wrap=True)
    for run in comparison.runs:
        table.add_column(run.label)
    paths = (
        list(dict.fromkeys(p for c in comparison.configs for p in c))
        if every
        else list(comparison.differences)
    )
    for path in paths:
        values = [config.get(path) for config in comparison.configs]
        differs = path in comparison.differences
        cells: list[RenderableType] = [
            Text(shown(v), style="yellow" if differs else "") for v in values
        ]
        table.add_row(Text(f"* {path}" if every and differs else path), *cells)
    return table


def runs_table(comparison: Comparison) -> Table:
    """A row per job: its status, steps, final and best train loss, best evaluation loss,
    tokens seen, cost and stop reason."""
    table = Table(title="Runs", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("job")
    table.add_column("status")
    for name in ("steps", "final loss", "best loss", "eval loss", "tokens seen", "cost"):
        table.add_column(name, justify="right")
    table.add_column("stop reason")
    for run in comparison.runs:
        table.add_row(
            f"{run.label} {run.job.id}",
            run.status,
            f"{run.step}/{run.planned_steps}",
            _loss(run.final_loss),
            _loss(run.best_loss, run.best_step),
            _loss(run.eval_loss, run.eval_step),
            f"{run.tokens_seen:,}" if run.tokens_seen is not None else NONE,
            exact_dollars(run.cost_micro_cents),
            run.stop_reason or NONE,
        )
    return table


def render(comparison: Comparison, *, every: bool = False) -> list[Table]:
    return [config_table(comparison, every=every), runs_table(comparison)]


def _print(tables: list[Table]) -> None:
    """The tables at their natural width when not on a terminal, so a pipe or a file
    reads them whole rather than wrapped at 80 columns."""
    console = Console()
    if not console.is_terminal:
        unbounded = console.options.update_width(10_000)
        widest = max(console.measure(t, options=unbounded).maximum for t in tables)
        console = Console(width=max(80, widest), color_system=None)
    for table in tables:
        console.print(table)


@jobs.command("compare")
@click.argument("job_ids", nargs=-1, required=True, metavar="ID ID [ID…]")
@click.option("--all", "every", is_flag=True, help="Every config path, not only those that differ.")
@click.pass_context
def jobs_compare(ctx: click.Context, job_ids: tuple[str, ...], every: bool) -> None:
    """Compare 2 to 6 jobs: where their frozen configs differ (a row per dotted path, a
    column per job), then a row per job of status, steps, final and best loss,
    evaluation loss, tokens seen, cost and stop reason."""
    try:
        ids = checked_ids(job_ids)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with client(ctx) as api:
        comparison = api.compare_jobs(*ids)
    if comparison.differences or every:
        _print(render(comparison, every=every))
    else:
        click.echo("Config: the same in every job")
        _print([runs_table(comparison)])
