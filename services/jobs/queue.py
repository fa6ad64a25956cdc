"""Where a job waiting for an executor stands (`Job.queue`): its place among the tasks the
same executors could take, in the order they claim them (every org's counted, none named),
and when it should start, simulated over those executors' slots.

The simulation is pure (`start_in`, `run_seconds`, `remaining_seconds`); `QueueReader`
reads what it needs (ClaimService's executors and tasks, the jobs waiting, recent runs)
once for every job of an answer that waits."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import statistics
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.offers import Offer
from services.core.states import JobStatus, TaskStatus
from services.core.tables import JobRow, TaskRow
from services.jobs import expected
from trainyard.job.v1 import job_pb2
from trainyard.training import planning
from trainyard.training.catalog import Catalog

# How `eta_seconds` was computed.
MEASURED = "measured"  # from the running jobs' progress and recent runs alone
PROFILE = "profile"  # some duration from the base's profile: no run of it measured yet
NO_EXECUTOR = "no_executor"  # no connected executor can take the job: no estimate

# The jobs whose lead task, once open, waits to be claimed (ClaimService's CLAIMABLE).
_OPEN_WHILE = (JobStatus.PREPARING, JobStatus.RUNNING)
# The jobs that wait before their tasks exist: taken from the queue, then snapshotted.
_TASKLESS_WHILE = (JobStatus.QUEUED, JobStatus.PREPARING)


# -- the simulation ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Slot:
    """One task an executor can run at once, and the seconds until the task it runs now
    should end (0 when it runs none)."""

    executor: str
    free_in: float


@dataclasses.dataclass(frozen=True)
class Waiting:
    """A task ahead: how long it should run once claimed, and the executors that can
    take it."""

    seconds: float
    executors: frozenset[str]


def start_in(slots: Sequence[Slot], ahead: Sequence[Waiting]) -> float | None:
    """Seconds until the job behind `ahead` should start on one of `slots` (the slots of
    the executors that can take it): each task ahead, in claim order, takes the slot that
    frees first among its executors' and holds it for its run; the job takes the first
    slot free after them. None without a slot."""
    if not slots:
        return None
    free = [max(0.0, slot.free_in) for slot in slots]
    for task in ahead:
        choices = [i for i, slot in enumerate(slots) if slot.executor in task.executors]
        if not choices:
            continue  # none of these executors take it: it waits for others
        first = min(choices, key=lambda i: free[i])
        free[first] += max(0.0, task.seconds)
    return min(free)


def run_seconds(
    steps: int, runs: Sequence[expected.Run], step_seconds: float, fixed_seconds: float
) -> tuple[float, bool]:
    """How long a run of `steps` should hold its executor, and whether that is measured:
    recent runs' median seconds a step and median seconds around their loop (loading,
    saving, uploading) where there are runs, else the base's profile."""
    rates = [r.training_seconds / r.steps for r in runs if r.steps > 0 and r.training_seconds > 0]
    if not rates:
        return fixed_seconds + steps * step_seconds, False
    around = statistics.median(max(0.0, r.wall_seconds - r.training_seconds) for r in runs)
    return around + steps * statistics.median(rates), True


def remaining_seconds(
    *,
    planned_steps: int,
    step: int,
    step_seconds: float | None,
    since_report: float,
    post_seconds: float,
    whole_seconds: float,
    since_claim: float,
) -> float:
    """Seconds until a running task should end: its remaining steps at its own measured
    seconds a step (less the time since it last reported) and what follows its loop; a
    task that has not reported a step yet, its whole run less the time since its claim."""
    if step > 0 and step_seconds is not None:
        left = max(0, planned_steps - step) * step_seconds - since_report
        return max(0.0, left) + post_seconds
    return max(0.0, whole_seconds - since_claim)


# -- what it reads -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Executor:
    id: str
    offer: Offer
    # The tasks it runs now, each with its job.
    running: tuple[tuple[TaskRow, JobRow], ...] = ()


@dataclasses.dataclass(frozen=True)
class _Candidate:
    job: JobRow
    spec: job_pb2.Job


class QueueReader:
    """`Job.queue` for the jobs of one answer, reading each target's executors and waiting
    tasks once."""

    def __init__(self, session: Session, catalog: Catalog, now: dt.datetime) -> None:
        self._session = session
        self._catalog = catalog
        self._now = now
        self._waiting: dict[tuple[str, str], list[_Candidate]] = {}
        self._executors: dict[tuple[str, str], list[_Executor]] = {}
        self._runs: dict[tuple[str, str, str], list[expected.Run]] = {}

    def position(self, row: JobRow, *, created: bool = False) -> job_pb2.QueuePosition | None:
        """Where the job stands, or None unless it waits for an executor. `created`: the
        job as its create answers it, which waits (it may have moved on since)."""
        if not created and not self._waits(row):
            return None
        spec = row.frozen()
        target = self._target(row.org, spec)
        executors = [
            e
            for e in self._connected(target)
            if e.offer.device_for(spec, self._catalog) is not None
        ]
        order = self._order(target)
        if executors:  # the tasks those executors could take; the job's own always
            order = [
                c
                for c in order
                if c.job.id == row.id
                or any(e.offer.device_for(c.spec, self._catalog) for e in executors)
            ]
        mine = next((i for i, c in enumerate(order) if c.job.id == row.id), None)
        if mine is None:  # it moved since its row was read: last, as a new task would be
            order.append(_Candidate(row, spec))
            mine = len(order) - 1
        answer = job_pb2.QueuePosition(position=mine + 1, ahead=mine, total=len(order))
        if not executors:
            answer.basis = NO_EXECUTOR
            return answer
        eta, measured = self._eta(spec, executors, order[:mine])
        if eta is not None:
            answer.eta_seconds = round(eta, 1)
        answer.basis = MEASURED if measured else PROFILE
        return answer

    def _waits(self, row: JobRow) -> bool:
        """Queued, preparing before its tasks exist, or its lead task open and unclaimed."""
        if row.status == JobStatus.QUEUED:
            return True
        if row.status not in _OPEN_WHILE:
            return False
        lead = self._session.scalar(
            sa.select(TaskRow.status).where(
                TaskRow.job_id == row.id,
                TaskRow.attempt_number == row.attempt_count,
                TaskRow.position == 0,
            )
        )
        return lead == TaskStatus.OPEN or (lead is None and row.status == JobStatus.PREPARING)

    @staticmethod
    def _target(org: str, spec: job_pb2.Job) -> tuple[str, str]:
        """Whose executors take the job's lead: the platform's (`("", "")`), or its org's
        on the first machine it names."""
        machines = list(spec.resources.machines)
        return (org, machines[0]) if machines else ("", "")

    def _connected(self, target: tuple[str, str]) -> list[_Executor]:
        """The target's connected executors, each with what it runs: one statement."""
        if target not in self._executors:
            org, machine = target
            query = _connected_query(platform=not machine)
            offers: dict[str, Offer] = {}
            running: dict[str, list[tuple[TaskRow, JobRow]]] = {}
            for found in self._session.execute(query, {"org": org, "machine": machine}):
                executor = str(found.id)
                if executor not in offers:
                    offers[executor], running[executor] = Offer.from_json(found.offer), []
                if found.TaskRow is not None and found.JobRow is not None:
                    running[executor].append((found.TaskRow, found.JobRow))
            self._executors[target] = [
                _Executor(executor, offer, tuple(running[executor]))
                for executor, offer in offers.items()
            ]
        return self._executors[target]

    def _order(self, target: tuple[str, str]) -> list[_Candidate]:
        """The tasks waiting for the target's executors, in the order they claim: open
        lead tasks oldest first (ClaimService's `claim_candidates`), then the jobs whose
        tasks are not made yet, oldest first (as preparation takes them)."""
        if target in self._waiting:
            return list(self._waiting[target])
        org, machine = target
        params = {"org": org, "machine": machine}
        open_leads = _open_leads_query(platform=not machine)
        taskless = _taskless_query(platform=not machine)
        found = [_Candidate(job, job.frozen()) for job in self._session.scalars(open_leads, params)]
        for job in self._session.scalars(taskless, params):
            spec = job.frozen()
            if self._target(job.org, spec) == target:
                found.append(_Candidate(job, spec))
        self._waiting[target] = found
        return list(found)

    def _eta(
        self, spec: job_pb2.Job, executors: list[_Executor], ahead: list[_Candidate]
    ) -> tuple[float | None, bool]:
        kinds = {k for e in executors if (k := e.offer.device_for(spec, self._catalog))}
        base = self._catalog.get(spec.base_model)
        device = "cpu" if kinds == {"cpu"} else "cuda"
        measured = True
        slots: list[Slot] = []
        for executor in executors:
            for task, job in executor.running:
                left, known = self._left(task, job, device)
                measured = measured and known
                slots.append(Slot(executor.id, left))
            free = max(0, executor.offer.slots - len(executor.running))
            slots.extend(Slot(executor.id, 0.0) for _ in range(free))
        if base is None:
            return start_in(slots, []), False
        waiting = []
        for candidate in ahead:
            seconds, known = self._whole(candidate.job, candidate.spec, device)
            measured = measured and known
            able = frozenset(
                e.id for e in executors if e.offer.device_for(candidate.spec, self._catalog)
            )
            waiting.append(Waiting(seconds, able))
        return start_in(slots, waiting), measured

    def _whole(self, job: JobRow, spec: job_pb2.Job, device: str) -> tuple[float, bool]:
        """How long the job should hold an executor, and whether that is measured."""
        base = self._catalog.get(spec.base_model)
        if base is None:
            return 0.0, False
        key = (job.org, base.name, device)
        if key not in self._runs:
            self._runs[key] = expected.recent_runs(self._session, job.org, base.name, device)
        model = base.to_proto().profile.duration
        step = planning.step_seconds(model, spec.hyperparameters.max_seq_length)
        fixed = model.fixed_seconds + base.post_processing_seconds
        return run_seconds(job.planned().planned_steps, self._runs[key], step, fixed)

    def _left(self, task: TaskRow, job: JobRow, device: str) -> tuple[float, bool]:
        """Seconds until a running task should end, and whether that is measured."""
        spec = job.frozen()
        whole, measured = self._whole(job, spec, device)
        progress = job.progress or {}
        step = int(progress.get("step", 0))
        planned = int(progress.get("planned_steps", 0)) or job.planned().planned_steps
        eta = progress.get("eta_seconds")
        per_step = None
        if step > 0 and eta is not None and planned > step:
            per_step = float(eta) / (planned - step)
        elif step > 0 and job.running_time is not None and task.report_time is not None:
            per_step = max(0.0, (task.report_time - job.running_time).total_seconds()) / step
        base = self._catalog.get(spec.base_model)
        left = remaining_seconds(
            planned_steps=planned,
            step=step,
            step_seconds=per_step,
            since_report=_since(task.report_time, self._now),
            post_seconds=base.post_processing_seconds if base else 0.0,
            whole_seconds=whole,
            since_claim=_since(task.claim_time, self._now),
        )
        return left, measured or per_step is not None


def _since(when: dt.datetime | None, now: dt.datetime) -> float:
    return max(0.0, (now - when).total_seconds()) if when is not None else 0.0


# The reads are built once each (the platform's, or an org's machine's) and take the org
# and machine as parameters: building and keying a statement of joins cost more than
# running it.
_ORG: sa.BindParameter[str] = sa.bindparam("org")
_MACHINE: sa.BindParameter[str] = sa.bindparam("machine")


@functools.cache
def _connected_query(*, platform: bool) -> sa.Select[tuple[str, Any, TaskRow, JobRow]]:
    """The target's connected executors, each with the tasks it holds and their jobs."""
    table = expected.EXECUTORS
    query = (
        sa.select(table.c.id, table.c.offer, TaskRow, JobRow)
        .select_from(table)
        .outerjoin(
            TaskRow,
            sa.and_(TaskRow.executor_id == table.c.id, TaskRow.status == TaskStatus.LEASED),
        )
        .outerjoin(JobRow, JobRow.id == TaskRow.job_id)
        .where(table.c.connected.is_(True))
        .order_by(table.c.id, TaskRow.id)
    )
    if platform:
        return query.where(table.c.platform.is_(True))
    return query.where(table.c.org == _ORG, table.c.machine == _MACHINE)


@functools.cache
def _open_leads_query(*, platform: bool) -> sa.Select[tuple[JobRow]]:
    """The jobs of the target's open lead tasks, as ClaimService takes them."""
    query = (
        sa.select(JobRow)
        .join(TaskRow, TaskRow.job_id == JobRow.id)
        .where(
            TaskRow.status == TaskStatus.OPEN,
            TaskRow.position == 0,
            TaskRow.attempt_number == JobRow.attempt_count,
            JobRow.status.in_(_OPEN_WHILE),
        )
        .order_by(TaskRow.create_time, TaskRow.id)
    )
    if platform:
        return query.where(TaskRow.machine == "")
    return query.where(TaskRow.org == _ORG, TaskRow.machine == _MACHINE)


@functools.cache
def _taskless_query(*, platform: bool) -> sa.Select[tuple[JobRow]]:
    """The jobs whose tasks are not made yet, as preparation takes them (the org's, or
    all for the platform's: the caller keeps those its target runs)."""
    made = (
        sa.select(TaskRow.id)
        .where(TaskRow.job_id == JobRow.id, TaskRow.attempt_number == JobRow.attempt_count)
        .exists()
    )
    query = (
        sa.select(JobRow)
        .where(JobRow.status.in_(_TASKLESS_WHILE), ~made)
        .order_by(JobRow.create_time, JobRow.id)
    )
    return query if platform else query.where(JobRow.org == _ORG)
