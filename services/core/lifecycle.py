"""The one lifecycle module: every change of a job's, an attempt's, a task's or a
preparation's state, as named transitions the services call, and the durable record each
leaves. The states and the moves each allows are `states`; nothing else assigns them.

Every transition runs in its caller's transaction with the job's row locked or its version
checked, so two writers cannot both move one job; each appends the job's events (and an
audit row for a job's move) in that same transaction.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import audit, errors
from services.core.ids import new_id
from services.core.states import (
    ATTEMPT_MOVES,
    ATTEMPT_TERMINAL,
    BOUND_REACHED,
    FAILURES,
    INPUT_FAILED,
    JOB_MOVES,
    PREPARATION_MOVES,
    RETRYABLE,
    RUN_FAILED,
    TASK_ENDED,
    TASK_MOVES,
    TERMINAL,
    AttemptStatus,
    CancelPlan,
    JobStatus,
    PreparationStatus,
    TaskStatus,
    cancel_plan,
    check_move,
)
from services.core.store import utcnow
from services.core.tables import AttemptRow, EventRow, JobRow, SnapshotRow, TaskRow

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
    job.event_seq += 1
    now = utcnow()
    job.update_time = now
    session.add(
        EventRow(
            job_id=job.id,
            seq=job.event_seq,
            org=job.org,
            type=type_,
            attempt_number=attempt,
            data={k: v for k, v in data.items() if v is not None},
            create_time=now,
        )
    )
    return job.event_seq


def current_attempt(session: Session, job: JobRow) -> AttemptRow:
    row = session.scalar(
        sa.select(AttemptRow).where(
            AttemptRow.job_id == job.id, AttemptRow.attempt_number == job.attempt_count
        )
    )
    if row is None:
        raise errors.NotFound()
    return row


def _tasks(session: Session, job: JobRow, *statuses: str) -> list[TaskRow]:
    """The current attempt's tasks, in rank order; only those in `statuses` when given."""
    query = sa.select(TaskRow).where(
        TaskRow.job_id == job.id, TaskRow.attempt_number == job.attempt_count
    )
    if statuses:
        query = query.where(TaskRow.status.in_(statuses))
    return list(session.scalars(query.order_by(TaskRow.position)))


def held(session: Session, job: JobRow) -> bool:
    """Whether an executor holds a task of the job's current attempt."""
    return bool(_tasks(session, job, T.LEASED))


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
    now = utcnow()
    if (stamp := _STAMPS.get(target)) and getattr(job, stamp) is None:
        setattr(job, stamp, now)
    if target in TERMINAL:
        job.end_time = now
    if failure:
        job.failure_code, job.failure_category, job.failure_message = failure
    append_event(
        session, job, "transition", attempt=job.attempt_count, status=target,
        previous_status=previous, reason=reason or None,
    )  # fmt: skip
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
    if target in TASK_ENDED:
        task.end_time = utcnow()
    return True


def move_preparation(job: JobRow, target: PreparationStatus, **fields: Any) -> bool:
    current = (job.preparation or {}).get("status", P.QUEUED)
    if not check_move(PREPARATION_MOVES, current, target):
        return False
    job.preparation = {**(job.preparation or {}), **fields, "status": str(target)}
    return True


def _end_tasks(session: Session, job: JobRow, target: TaskStatus) -> None:
    """End every task of the job's current attempt that has not ended."""
    for task in _tasks(session, job):
        if task.status not in TASK_ENDED:
            move_task(task, target)


def failure_of(code: str, *, stopped: bool = False) -> Failure:
    """A failure code with the category and the sentence a user reads for it."""
    if stopped:
        return (code, *BOUND_REACHED)
    return (code, *FAILURES.get(code, RUN_FAILED))


# -- preparation ----------------------------------------------------------------------------


def start_preparation(session: Session, job: JobRow) -> bool:
    """A queued job is taken for preparation, or a stalled one again. True when its
    snapshot exists already (a retry reads the one it had): its tasks open at once."""
    if job.status == J.PREPARING:
        job.update_time = utcnow()  # taken again: quiet for another while
    else:
        move_job(session, job, J.PREPARING, reason="preparation_started")
    if (job.preparation or {}).get("status") == P.VERIFIED:
        _open_tasks(session, job)
        return True
    move_preparation(job, P.SNAPSHOTTING)
    return False


def snapshot_verified(session: Session, job: JobRow, sha256: str, selected: int) -> None:
    """The snapshot is made: the job reads it, and its tasks may be claimed."""
    job.dataset_sha256, job.snapshot_time = sha256, utcnow()
    move_preparation(
        job,
        P.VERIFIED,
        snapshot_sha256=sha256,
        selected_examples=selected,
        trainable_examples=job.plan.get("selected_examples", 0),
    )
    append_event(
        session, job, "transition", attempt=job.attempt_count, status=J.PREPARING,
        reason="snapshot_verified",
    )  # fmt: skip
    _open_tasks(session, job)


def preparation_failed(session: Session, job: JobRow, code: str) -> None:
    """The input cannot be snapshotted: nothing ran, the job fails uncharged."""
    move_preparation(job, P.FAILED, failure_code=code)
    failure = (code, *INPUT_FAILED)
    move_attempt(session, job, current_attempt(session, job), A.FAILED, failure=failure)
    move_job(session, job, J.FAILED, reason="preparation_failed", failure=failure)


def _open_tasks(session: Session, job: JobRow) -> None:
    """Make the current attempt's tasks: a lead on the first machine the job names (or for
    the platform's executor), a join on each other, offered once the lead coordinates."""
    if _tasks(session, job):
        return
    machines = list(((job.spec or {}).get("resources") or {}).get("machines") or [""])
    now = utcnow()
    for position, machine in enumerate(machines):
        session.add(
            TaskRow(
                id=new_id("tsk"), org=job.org, job_id=job.id, attempt_number=job.attempt_count,
                position=position, role="lead" if position == 0 else "join", machine=machine,
                world_size=len(machines), status=T.OPEN if position == 0 else T.WAITING,
                create_time=now,
            )
        )  # fmt: skip


# -- cancel and retry ----------------------------------------------------------------------


def cancel(session: Session, job: JobRow, *, actor: str = "", request_id: str = "") -> None:
    """A cancel from the owner: at once while nothing runs, else through `cancelling`
    until the executor holding a task confirms (or its lease lapses). Repeats are no-ops;
    a refusal (JOB_FINALIZING, INVALID_TRANSITION) raises."""
    plan = cancel_plan(job.status, held=held(session, job))
    if plan == CancelPlan.NOW:
        move_attempt(session, job, current_attempt(session, job), A.CANCELLED)
        if (job.preparation or {}).get("status") in (P.QUEUED, P.SNAPSHOTTING):
            move_preparation(job, P.CANCELLED)
        _end_tasks(session, job, T.CANCELLED)
        move_job(
            session, job, J.CANCELLED, reason="cancel_requested", actor=actor,
            request_id=request_id,
        )  # fmt: skip
    elif plan == CancelPlan.COOPERATIVE:
        move_job(
            session, job, J.CANCELLING, reason="cancel_requested", actor=actor,
            request_id=request_id,
        )  # fmt: skip


def requeue(session: Session, job: JobRow, attempt: AttemptRow, *, actor: str = "") -> None:
    """The one exception to terminal states: a retry puts the job back in the queue as a
    new attempt, keeping its frozen spec and snapshot."""
    if job.status not in RETRYABLE:
        raise errors.InvalidTransition()
    previous, job.status = job.status, J.QUEUED
    job.attempt_count = attempt.attempt_number
    if (job.preparation or {}).get("status") != P.VERIFIED:
        job.preparation = {"status": str(P.QUEUED)}  # never snapshotted: the retry does it
    job.end_time = None
    job.failure_code = job.failure_category = job.failure_message = ""
    job.progress = None
    job.outcome = None
    append_event(
        session, job, "transition", attempt=attempt.attempt_number, status=J.QUEUED,
        previous_status=previous, reason="retry_requested",
    )  # fmt: skip
    audit.record(
        session, "training.job.retry.accepted", org=job.org, subject=job.id, actor=actor,
        code=f"{previous}->queued", attempt=attempt.attempt_number,
    )  # fmt: skip


# -- the executor's side -------------------------------------------------------------------


def lease(session: Session, job: JobRow, task: TaskRow) -> None:
    """An executor holds the task now; a lead's attempt is leased with it."""
    move_task(task, T.LEASED)
    if task.role == "lead":
        move_attempt(session, job, current_attempt(session, job), A.LEASED)


def release(session: Session, job: JobRow, task: TaskRow) -> None:
    """The executor gives the task back unrun: open for another claim."""
    move_task(task, T.OPEN)
    attempt = current_attempt(session, job)
    if task.role == "lead" and attempt.status == A.LEASED:
        move_attempt(session, job, attempt, A.QUEUED)


def coordinate(session: Session, job: JobRow, task: TaskRow, addr: str) -> None:
    """The lead reports the address it coordinates on: its joins are offered with it."""
    task.coordinator = addr
    for join in _tasks(session, job, T.WAITING):
        join.coordinator = addr
        move_task(join, T.OPEN)
    append_event(session, job, "coordinator", attempt=job.attempt_count)


def report_status(
    session: Session, job: JobRow, task: TaskRow, attempt: AttemptRow, status: str, error: str
) -> None:
    """A status the executor reports for a task. A lead's moves its attempt and the job,
    which stays `cancelling` once a cancel was asked; a join's ends the join, or the job."""
    cancelling = job.status == J.CANCELLING
    if task.role == "join":
        if status == "done":
            move_task(task, T.DONE)
        else:
            fail(session, job, attempt, error or f"join_{status}")
        return
    if status == "accepted":
        move_attempt(session, job, attempt, A.ACCEPTED)
    elif status == "running":
        move_attempt(session, job, attempt, A.STARTED)
        if not cancelling:
            move_job(session, job, J.RUNNING, reason="training_started")
    elif status == "evaluating" and not cancelling:
        move_job(session, job, J.EVALUATING, reason="evaluation_started")
    elif status == "finalizing":
        move_attempt(session, job, attempt, A.FINALIZING)
        if not cancelling:
            move_job(session, job, J.FINALIZING, reason="training_finished")
    elif status == "cancelled":
        finish(session, job, attempt, J.CANCELLED)
    elif status == "stopped":
        fail(session, job, attempt, error or "stopped", job_status=J.STOPPED)
    elif status == "failed":
        fail(session, job, attempt, error or "trainer_failed")


def finish(session: Session, job: JobRow, attempt: AttemptRow, status: JobStatus) -> None:
    """The run ended with its result (or a cancel before any): the job takes `status`,
    a cancelled one keeping what it trained."""
    if job.status in (J.RUNNING, J.EVALUATING) and status in (J.SUCCEEDED, J.REJECTED):
        move_job(session, job, J.FINALIZING, reason="training_finished")
    if attempt.status in (A.LEASED, A.ACCEPTED) and status != J.CANCELLED:
        move_attempt(session, job, attempt, A.STARTED)
    move_attempt(session, job, attempt, A.CANCELLED if status == J.CANCELLED else A.SUCCEEDED)
    move_job(session, job, status, reason="run_" + status)
    _end_tasks(session, job, T.DONE)


def fail(
    session: Session,
    job: JobRow,
    attempt: AttemptRow,
    code: str,
    *,
    job_status: JobStatus = J.FAILED,
) -> None:
    """The run failed (or stopped at a bound): the attempt fails with its code, and the job
    too, unless it was being cancelled, which a failure completes."""
    failure = failure_of(code, stopped=job_status == J.STOPPED)
    move_attempt(session, job, attempt, A.FAILED, failure=failure)
    if job.status == J.CANCELLING:
        move_job(session, job, J.CANCELLED, reason="run_cancelled")
    elif job.status not in TERMINAL:
        move_job(session, job, job_status, reason=code, failure=failure)
    _end_tasks(session, job, T.FAILED)


def lose(session: Session, job: JobRow, task: TaskRow) -> None:
    """A task silent past its lease: expired; a lost lead fails its job `executor_lost`
    (a run resumes only from its own checkpoint, so it is not moved elsewhere)."""
    move_task(task, T.EXPIRED)
    if job.status in TERMINAL or job.attempt_count != task.attempt_number:
        return
    attempt = current_attempt(session, job)
    failure = failure_of("executor_lost")
    if attempt.status not in ATTEMPT_TERMINAL:
        move_attempt(session, job, attempt, A.EXPIRED, failure=failure)
    if job.status == J.CANCELLING:
        move_job(session, job, J.CANCELLED, reason="executor_lost")
    else:
        move_job(session, job, J.FAILED, reason="executor_lost", failure=failure)
    _end_tasks(session, job, T.FAILED)


# -- deletion ------------------------------------------------------------------------------


def tombstone(session: Session, job: JobRow) -> None:
    """What is left of a job once its artifact is deleted (`001_…`): its id, number,
    status and times; no request, dataset, model, parameters or hashes. The snapshot it
    read goes too, unless another job still reads it."""
    dataset = job.dataset_sha256
    job.spec = None
    job.spec_sha256 = job.dataset_sha256 = job.reads_sha256 = job.requested_by = ""
    job.plan = {}
    job.preparation = job.progress = job.evaluation = job.outcome = job.result = None
    job.model_available = False
    job.deleted = True
    job.update_time = utcnow()
    session.execute(
        sa.delete(EventRow).where(
            EventRow.job_id == job.id, EventRow.type.in_(("artifact", "result", "log"))
        )
    )
    session.flush()
    if dataset:
        others = session.scalar(
            sa.select(sa.func.count())
            .select_from(JobRow)
            .where(JobRow.org == job.org, JobRow.dataset_sha256 == dataset)
        )
        if not others:
            session.execute(
                sa.delete(SnapshotRow).where(
                    SnapshotRow.org == job.org, SnapshotRow.sha256 == dataset
                )
            )
