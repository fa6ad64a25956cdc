"""`trainyard jobs watch`: a live bar (state, step of planned, loss, ETA) on a terminal,
plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from trainyard.job.v1 import job_pb2, job_service_pb2

TERMINAL = {"succeeded", "rejected", "failed", "cancelled", "stopped"}


def _eta(job: job_pb2.Job) -> str:
    if not job.progress.HasField("eta_seconds"):
        return "-"
    seconds = int(job.progress.eta_seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def _loss(job: job_pb2.Job) -> str:
    return f"{job.progress.loss:.4f}" if job.progress.HasField("loss") else "-"


def about(seconds: float) -> str:
    """A wait, roughly: `40 s`, `5 min`, `2 h`."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


def queue_line(job: job_pb2.Job) -> str:
    """Where a waiting job stands (`queued: position 2 of 3, starts in about 40 s`); empty
    for a job that waits for no executor."""
    if not job.HasField("queue"):
        return ""
    queue = job.queue
    line = f"queued: position {queue.position} of {queue.total}"
    if queue.HasField("eta_seconds"):
        return f"{line}, starts in about {about(queue.eta_seconds)}"
    return f"{line}, no connected executor can take it yet"


def describe(job: job_pb2.Job) -> str:
    """One plain line about a job's state and progress, and its place while it waits."""
    parts = [f"{job.id} {job.status}", f"step {job.progress.step}/{job.planned_steps}"]
    if waiting := queue_line(job):
        parts.append(waiting)
    if job.progress.HasField("loss"):
        parts.append(f"loss {_loss(job)}")
    if job.progress.HasField("eta_seconds") and job.status not in TERMINAL:
        parts.append(f"eta {_eta(job)}")
    if job.failure_code:
        parts.append(f"failure {job.failure_code}")
    if job.status in TERMINAL:
        parts.append(f"model_available {str(job.model_available).lower()}")
    return "  ".join(parts)


def grades(job: job_pb2.Job) -> list[str]:
    """The graded suites of an ended job, base against trained, and its verdict; nothing
    for a job that graded none."""
    found = job.evaluation.grades
    if not found:
        return []
    budget = job.protect.budget
    lines = [
        f"verdict {job.evaluation.verdict or '-'}"
        + (
            f"  (budget: accuracy down at most {budget.accuracy:g}, ece up at most {budget.ece:g})"
            if job.protect.suites
            else ""
        ),
        f"{'suite':<14}{'role':<11}{'n':>5}  {'accuracy':>17}  {'log loss':>17}  {'ece':>17}  within",
    ]
    for g in found:
        pairs = [
            f"{getattr(g.base, m):.3f} → {getattr(g.trained, m):.3f}"
            for m in ("accuracy", "log_loss", "ece")
        ]
        within = ("yes" if g.within_budget else "no") if g.role == "protected" else "-"
        lines.append(
            f"{g.suite:<14}{g.role:<11}{g.examples:>5}  "
            + "  ".join(f"{p:>17}" for p in pairs)
            + f"  {within}"
        )
    return lines


def watch(updates: object, out: IO[str] | None = None) -> job_pb2.Job | None:
    """Render a stream of WatchJobResponse until it ends; returns the last job seen."""
    out = out or sys.stdout
    last: job_pb2.Job | None = None
    if out.isatty():
        console = Console(file=out)
        columns = (
            TextColumn("[bold]{task.fields[status]:<11}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("eta {task.fields[eta]}"),
            TextColumn("{task.fields[queue]}"),
        )
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task("job", total=None, status="…", loss="-", eta="-", queue="")
            for update in updates:  # type: ignore[attr-defined]
                if update.HasField("job"):
                    last = update.job
                    bar.update(
                        task,
                        total=last.planned_steps or None,
                        completed=last.progress.step,
                        status=last.status,
                        loss=_loss(last),
                        eta=_eta(last),
                        queue=queue_line(last),
                    )
        if last is not None:
            console.print(describe(last))
            for line in grades(last):
                console.print(line, highlight=False)
        return last
    previous = ""
    for update in updates:  # type: ignore[attr-defined]
        assert isinstance(update, job_service_pb2.WatchJobResponse)
        if update.HasField("job"):
            last = update.job
            line = describe(last)
            if line != previous:
                out.write(f"{time.strftime('%H:%M:%S')} {line}\n")
                out.flush()
                previous = line
    if last is not None and (found := grades(last)):
        out.write("\n".join(found) + "\n")
    return last
