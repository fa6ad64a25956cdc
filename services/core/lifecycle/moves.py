"""The record every transition leaves, and the moves transitions are made of: each
checks its table in `states`, stamps its times, and appends the job's events (a job's move
also an audit row) in the caller's transaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, object_session

from services.core import audit, bulk, errors, webhooks
from services.core.lifecycle.money import release_holds
from services.core.states import (
    ATTEMPT_MOVES,
    ATTEMPT_TERMINAL,
    BOUND_REACHED,
    FAILURES,
    JOB_MOVES,
    PREPARATION_MOVES,
    RUN_FAILED,
    STOPPING,
    STOPS,
    TASK_ENDED,
    TASK_MOVES,
    TERMINAL,
    TRAINER_ENDED,
    TRAINER_ERROR,
    AttemptStatus,
    JobStatus,
    PreparationStatus,
    TaskStatus,
    check_move,
)
from services.core.store import utcnow
from services.core.tables import AttemptRow, EventRow, JobRow, TaskRow, attempts_read
from services.core.wakeups import claimable_topic, executor_topic, job_topic, mark

J, A, T, P = JobStatus, AttemptStatus, TaskStatus, PreparationStatus
Failure = tuple[str, str, str]

# The column stamped the first time a job, or an attempt, enters each state.
_STAMPS = {
    J.PREPARING: "preparing_time",
    J.RUNNING: "running_time",
    J.FINALIZING: "finalizing_time",
    J.CANCELLING: "cancelling_time",
}
_ATTEMPT_STAMPS = {
    A.LEASED: "leased_time",
    A.STARTED: "started_time",
    A.FINALIZING: "finalizing_time",
}


# -- the record ---------------------------------------------------------------------------


def append_event(
    session: Session, job: JobRow, type_: str, *, attempt: int = 0, **data: Any
) -> int:
    """Append one event to the job's record in the caller's transaction; returns its seq."""
    seq = _number(session, job, 1)
    session.add(
        EventRow(
            job_id=job.id,
            seq=seq,
            org=job.org,
            type=type_,
            attempt_number=attempt,
            data={k: v for k, v in data.items() if v is not None},
            create_time=job.update_time,
        )
    )
    return seq


def append_metrics(
    session: Session, job: JobRow, points: Sequence[bulk.Point], *, attempt: int, now: dt.datetime
) -> None:
    """Append a run of metric points (a report's) to the job's series, as of `now` (a
    point stored already is kept), and each as its next event, in one document
    (`bulk.add_metric_run`): the ORM's unit of work would build and flush two objects a
    point."""
    if points:
        bulk.add_metric_run(
            session,
            job_id=job.id,
            org=job.org,
            attempt=attempt,
            first_seq=_number(session, job, len(points)),
            points=points,
            series_time=now,
            event_time=job.update_time,
        )


def _number(session: Session, job: JobRow, count: int) -> int:
    """The seq of the first of the job's `count` next events (stamped now, in
    `job.update_time`); the job's record grows, so its watchers wake once the transaction
    commits."""
    mark(session, job_topic(job.id))
    job.update_time = utcnow()
    first, job.event_seq = job.event_seq + 1, job.event_seq + count
    return first


def current_attempt(session: Session, job: JobRow) -> AttemptRow:
    known = attempts_read(session)
    row = known.get((job.id, job.attempt_count))
    if row is None:
        row = session.scalar(
            sa.select(AttemptRow).where(
                AttemptRow.job_id == job.id, AttemptRow.attempt_number == job.attempt_count
            )
        )
        if row is None:
            raise errors.NotFound()
        known[job.id, job.attempt_count] = row
    return row


def tasks_of(session: Session, job: JobRow, *statuses: str) -> list[TaskRow]:
    """The current attempt's tasks, in rank order; only those in `statuses` when given."""
    query = sa.select(TaskRow).where(
        TaskRow.job_id == job.id, TaskRow.attempt_number == job.attempt_count
    )
    if statuses:
        query = query.where(TaskRow.status.in_(statuses))
    return list(session.scalars(query.order_by(TaskRow.position)))


def held(session: Session, job: JobRow) -> bool:
    """Whether an executor holds a task of the job's current attempt."""
    return bool(tasks_of(session, job, T.LEASED))


# -- the moves every transition is made of -------------------------------------------------


def move_job(
    session: Session,
    job: JobRow,
    target: JobStatus,
    *,
    reason: str = "",
    failure: Failure | None = None,
    actor: str = "",
    request_id: str = "",
) -> bool:
    """Move a job, stamping its times, appending a `transition` event and an audit row.
    False for a same-state replay."""
    if not check_move(JOB_MOVES, job.status, target):
        return False
    previous, job.status = job.status, target
    if target in STOPPING:  # the executors holding its tasks are told to stop them
        mark(session, *(executor_topic(t.executor_id) for t in tasks_of(session, job, T.LEASED)))
    now = utcnow()
    if (stamp := _STAMPS.get(target)) and getattr(job, stamp) is None:
        setattr(job, stamp, now)
    if target in TERMINAL:
        job.end_time = now
        # Any end releases what the job's tasks held beyond what was metered (§10 Ends).
        release_holds(session, job_id=job.id, now=now)
    if failure:
        job.failure_code, job.failure_category, job.failure_message = failure
    append_event(
        session,
        job,
        "transition",
        attempt=job.attempt_count,
        status=target,
        previous_status=previous,
        reason=reason or None,
    )
    audit.record(
        session,
        "training.job.state.transitioned",
        org=job.org,
        subject=job.id,
        code=f"{previous}->{target}",
        actor=actor,
        request_id=request_id,
        reason=reason or None,
    )
    if target in TERMINAL:  # the org's webhooks hear of it once this commits
        webhooks.job_ended(session, job)
    return True


def move_attempt(
    session: Session,
    job: JobRow,
    attempt: AttemptRow,
    target: AttemptStatus,
    *,
    failure: Failure | None = None,
) -> bool:
    if not check_move(ATTEMPT_MOVES, attempt.status, target):
        return False
    previous, attempt.status = attempt.status, target
    now = utcnow()
    if (stamp := _ATTEMPT_STAMPS.get(target)) and getattr(attempt, stamp) is None:
        setattr(attempt, stamp, now)
    if target in ATTEMPT_TERMINAL:
        attempt.end_time = now
    if failure:
        attempt.failure_code, attempt.failure_category, attempt.failure_message = failure
    append_event(
        session,
        job,
        "attempt",
        attempt=attempt.attempt_number,
        status=target,
        previous_status=previous,
        reason=failure[0] if failure else None,
    )
    return True


def move_task(task: TaskRow, target: TaskStatus) -> bool:
    if not check_move(TASK_MOVES, task.status, target):
        return False
    task.status = target
    if target == T.OPEN and (session := object_session(task)) is not None:
        mark(session, claimable_topic(task.org, task.machine))
    if target in TASK_ENDED:
        task.end_time = utcnow()
    return True


def move_preparation(job: JobRow, target: PreparationStatus, **fields: Any) -> bool:
    current = (job.preparation or {}).get("status", P.QUEUED)
    if not check_move(PREPARATION_MOVES, current, target):
        return False
    job.preparation = {**(job.preparation or {}), **fields, "status": str(target)}
    return True


def end_tasks(session: Session, job: JobRow, target: TaskStatus) -> None:
    """End every task of the job's current attempt that has not ended."""
    for task in tasks_of(session, job):
        if task.status not in TASK_ENDED:
            move_task(task, target)


def failure_of(code: str, *, stopped: bool = False, error: str = "") -> Failure:
    """A failure code with the category and the sentence a user reads for it; a trainer's
    failure ends with the `error` its log ends with, when there is one."""
    if stopped:
        return (code, *STOPS.get(code, BOUND_REACHED))
    if error and code in TRAINER_ENDED:
        return (code, FAILURES[code][0], TRAINER_ERROR + error)
    return (code, *FAILURES.get(code, RUN_FAILED))
