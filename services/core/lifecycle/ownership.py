"""What the owner asks of a job and what ends it: a cancel, a retry, and the tombstone
left once its output is deleted."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import attempt_logs, audit, errors
from services.core.lifecycle.moves import (
    A,
    J,
    P,
    T,
    append_event,
    current_attempt,
    end_tasks,
    held,
    move_attempt,
    move_job,
    move_preparation,
)
from services.core.states import (
    RETRYABLE,
    CancelPlan,
    cancel_plan,
)
from services.core.store import utcnow
from services.core.tables import AttemptRow, EventRow, JobRow, SnapshotRow
from services.core.wakeups import mark, queued_topic

# -- cancel and retry ----------------------------------------------------------------------


def cancel(session: Session, job: JobRow, *, actor: str = "", request_id: str = "") -> None:
    """A cancel from the owner: at once while nothing runs, else through `cancelling`
    until the executor holding a task confirms (or its lease lapses). Repeats are no-ops;
    a refusal (TRAINING_JOB_FINALIZING, INVALID_TRANSITION) raises."""
    plan = cancel_plan(job.status, held=held(session, job))
    if plan == CancelPlan.NOW:
        move_attempt(session, job, current_attempt(session, job), A.CANCELLED)
        if (job.preparation or {}).get("status") in (P.QUEUED, P.SNAPSHOTTING):
            move_preparation(job, P.CANCELLED)
        end_tasks(session, job, T.CANCELLED)
        move_job(
            session,
            job,
            J.CANCELLED,
            reason="cancel_requested",
            actor=actor,
            request_id=request_id,
        )
    elif plan == CancelPlan.COOPERATIVE:
        move_job(
            session,
            job,
            J.CANCELLING,
            reason="cancel_requested",
            actor=actor,
            request_id=request_id,
        )


def requeue(session: Session, job: JobRow, attempt: AttemptRow, *, actor: str = "") -> None:
    """The one exception to terminal states: a retry puts the job back in the queue as a
    new attempt, keeping its frozen spec and snapshot."""
    if job.status not in RETRYABLE:
        raise errors.InvalidTransition()
    previous, job.status = job.status, J.QUEUED
    mark(session, queued_topic())
    job.attempt_count = attempt.attempt_number
    if (job.preparation or {}).get("status") != P.VERIFIED:
        job.preparation = {"status": str(P.QUEUED)}  # never snapshotted: the retry does it
    job.end_time = None
    job.failure_code = job.failure_category = job.failure_message = ""
    job.progress = None
    job.outcome = None
    append_event(
        session,
        job,
        "transition",
        attempt=attempt.attempt_number,
        status=J.QUEUED,
        previous_status=previous,
        reason="retry_requested",
    )
    audit.record(
        session,
        "training.job.retry.accepted",
        org=job.org,
        subject=job.id,
        actor=actor,
        code=f"{previous}->queued",
        attempt=attempt.attempt_number,
    )


# -- deletion ------------------------------------------------------------------------------


def tombstone(session: Session, job: JobRow) -> None:
    """What is left of a job once its artifact is deleted (`001_…`): its id, number,
    status and times; no request, dataset, model, parameters or hashes. The snapshot it
    read goes too, unless another job still reads it."""
    dataset = job.dataset_sha256
    job.spec = None
    job.spec_sha256 = job.dataset_sha256 = job.reads_sha256 = job.requested_by = ""
    job.from_sha256 = ""
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
    attempt_logs.delete(session, job.id)
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
