"""The one lifecycle module: the job's and the attempt's states, every move between them,
and the durable record each move leaves.

Every service that changes a job's status does it here, inside its own transaction, with
the job row's version checked, so two writers cannot both move one job. A move to the
state the job is already in is a no-op; any move the tables below do not allow is
`INVALID_TRANSITION`. Terminal states never change, except that an explicit retry starts
a new attempt of a `failed` or `cancelled` job.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import audit, errors
from services.core.ids import new_id
from services.core.store import Base, UtcDateTime, utcnow

TERMINAL = frozenset({"succeeded", "rejected", "failed", "cancelled", "stopped"})

JOB_MOVES: dict[str, frozenset[str]] = {
    "queued": frozenset({"preparing", "failed", "cancelled", "stopped"}),
    # `cancelling` once an executor holds the task: the cancel must reach it first.
    "preparing": frozenset({"running", "cancelling", "failed", "cancelled", "stopped"}),
    "running": frozenset({"evaluating", "finalizing", "cancelling", "failed", "stopped"}),
    "evaluating": frozenset({"finalizing", "cancelling", "failed", "stopped"}),
    "finalizing": frozenset({"succeeded", "rejected", "failed"}),
    "cancelling": frozenset({"cancelled", "failed"}),
    **{state: frozenset() for state in TERMINAL},
}
JOB_STATES = frozenset(JOB_MOVES)
# `002_…` "Retry explícito": only a failed or cancelled job is run again.
RETRYABLE = frozenset({"failed", "cancelled"})

ATTEMPT_TERMINAL = frozenset({"succeeded", "failed", "cancelled", "expired"})
ATTEMPT_MOVES: dict[str, frozenset[str]] = {
    "queued": frozenset({"leased", "failed", "cancelled"}),
    # Back to `queued` when the executor gives its task back unrun.
    "leased": frozenset({"queued", "accepted", "started", "failed", "cancelled", "expired"}),
    "accepted": frozenset({"started", "failed", "cancelled", "expired"}),
    "started": frozenset({"finalizing", "succeeded", "failed", "cancelled", "expired"}),
    "finalizing": frozenset({"succeeded", "failed", "cancelled", "expired"}),
    **{state: frozenset() for state in ATTEMPT_TERMINAL},
}

# The job column stamped the first time a job enters each state.
_STAMPS = {
    "preparing": "preparing_time",
    "running": "running_time",
    "finalizing": "finalizing_time",
    "cancelling": "cancelling_time",
}
_ATTEMPT_STAMPS = {
    "leased": "leased_time",
    "started": "started_time",
    "finalizing": "finalizing_time",
}


class JobRow(Base):
    """A job: its frozen spec and plan, and what became of it."""

    __tablename__ = "jobs"
    __table_args__ = (
        sa.UniqueConstraint("org", "project", "number", name="uq_jobs_org_project_number"),
        sa.Index("ix_jobs_org_create_time", "org", "create_time"),
        sa.Index("ix_jobs_org_status", "org", "status"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    project: Mapped[str] = mapped_column(sa.String(63))
    number: Mapped[int] = mapped_column(sa.BigInteger())
    status: Mapped[str] = mapped_column(sa.String(16))
    version: Mapped[int] = mapped_column(sa.Integer(), default=1)
    # The expanded, frozen spec as proto JSON; None once the job is a tombstone.
    spec: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    # sha256 of the canonical frozen spec: the training config hash of provenance.
    spec_sha256: Mapped[str] = mapped_column(sa.String(64), default="")
    # The plan and what the run reported, as proto JSON blocks.
    plan: Mapped[dict[str, Any]] = mapped_column(sa.JSON(), default=dict)
    preparation: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    progress: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    evaluation: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    outcome: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    dataset_sha256: Mapped[str] = mapped_column(sa.String(64), default="")
    # The sha256 of the uploaded object the job reads (`dataset.uri` `artifact:<sha256>`).
    reads_sha256: Mapped[str] = mapped_column(
        sa.String(64), default="", server_default="", index=True
    )
    model_available: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    failure_code: Mapped[str] = mapped_column(sa.String(64), default="")
    failure_category: Mapped[str] = mapped_column(sa.String(16), default="")
    failure_message: Mapped[str] = mapped_column(sa.String(256), default="")
    attempt_count: Mapped[int] = mapped_column(sa.Integer(), default=1)
    event_seq: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    requested_by: Mapped[str] = mapped_column(sa.String(64), default="")
    deleted: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    update_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    preparing_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    snapshot_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    running_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    finalizing_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    cancelling_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    end_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)

    __mapper_args__ = {"version_id_col": version}


class AttemptRow(Base):
    """One execution of a job."""

    __tablename__ = "attempts"
    __table_args__ = (
        sa.UniqueConstraint("job_id", "attempt_number", name="uq_attempts_job_id"),
        sa.UniqueConstraint("job_id", "idempotency_key", name="uq_attempts_job_id_key"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    job_id: Mapped[str] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"))
    org: Mapped[str] = mapped_column(sa.String(63))
    attempt_number: Mapped[int] = mapped_column(sa.Integer())
    status: Mapped[str] = mapped_column(sa.String(16))
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    resume_from_checkpoint: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    resume_step: Mapped[int | None] = mapped_column(sa.Integer(), nullable=True)
    training_seconds: Mapped[float | None] = mapped_column(sa.Float(), nullable=True)
    failure_code: Mapped[str] = mapped_column(sa.String(64), default="")
    failure_category: Mapped[str] = mapped_column(sa.String(16), default="")
    failure_message: Mapped[str] = mapped_column(sa.String(256), default="")
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    leased_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    started_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    finalizing_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    end_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class EventRow(Base):
    """One entry of a job's ordered, durable record."""

    __tablename__ = "job_events"

    job_id: Mapped[str] = mapped_column(
        sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(sa.BigInteger(), primary_key=True, autoincrement=False)
    org: Mapped[str] = mapped_column(sa.String(63))
    type: Mapped[str] = mapped_column(sa.String(16))
    attempt_number: Mapped[int] = mapped_column(sa.Integer(), default=0)
    # The event's typed fields (status, reason, name, step, value, line, sha256).
    data: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class MetricRow(Base):
    """One point of a job's metric series."""

    __tablename__ = "job_metrics"

    job_id: Mapped[str] = mapped_column(
        sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    attempt_number: Mapped[int] = mapped_column(sa.Integer(), primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    step: Mapped[int] = mapped_column(sa.Integer(), primary_key=True, autoincrement=False)
    value: Mapped[float] = mapped_column(sa.Float())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class TaskRow(Base):
    """One executor's share of an attempt: a `lead`, and a `join` per further machine,
    each claimed under a lease. The lease row is the truth, never the stream."""

    __tablename__ = "tasks"
    __table_args__ = (
        sa.UniqueConstraint("job_id", "attempt_number", "position", name="uq_tasks_job_id"),
        sa.Index("ix_tasks_status_create_time", "status", "create_time"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    job_id: Mapped[str] = mapped_column(sa.ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt_number: Mapped[int] = mapped_column(sa.Integer())
    # 0 for the lead, then one per further machine: the task's rank in the job's world.
    position: Mapped[int] = mapped_column(sa.Integer())
    role: Mapped[str] = mapped_column(sa.String(8))
    # The machine the job names for it; empty for a task the platform's executor may take.
    machine: Mapped[str] = mapped_column(sa.String(63), default="")
    world_size: Mapped[int] = mapped_column(sa.Integer(), default=1)
    # `waiting` (a join before its lead coordinates), `open`, `leased`, then `done`,
    # `failed`, `expired` or `cancelled`.
    status: Mapped[str] = mapped_column(sa.String(16))
    lease_sha256: Mapped[str] = mapped_column(sa.String(64), default="")
    epoch: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    lease_expires: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    executor_id: Mapped[str] = mapped_column(sa.String(32), default="")
    coordinator: Mapped[str] = mapped_column(sa.String(270), default="")
    device: Mapped[str] = mapped_column(sa.String(16), default="")
    devices: Mapped[int] = mapped_column(sa.Integer(), default=0)
    held: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    last_seq: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    cancel_sent: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    claim_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    report_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    end_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    version: Mapped[int] = mapped_column(sa.Integer(), default=1)

    __mapper_args__ = {"version_id_col": version}


TASK_ENDED = frozenset({"done", "failed", "expired", "cancelled"})


def open_tasks(session: Session, job: JobRow) -> None:
    """Make the current attempt's tasks once its dataset is snapshotted: a lead on the
    first machine the job names (or for the platform's executor), a join on each other."""
    exists = session.scalar(
        sa.select(TaskRow.id)
        .where(TaskRow.job_id == job.id, TaskRow.attempt_number == job.attempt_count)
        .limit(1)
    )
    if exists is not None:
        return
    machines = list(((job.spec or {}).get("resources") or {}).get("machines") or [""])
    now = utcnow()
    for position, machine in enumerate(machines):
        session.add(
            TaskRow(
                id=new_id("tsk"), org=job.org, job_id=job.id, attempt_number=job.attempt_count,
                position=position, role="lead" if position == 0 else "join", machine=machine,
                world_size=len(machines), status="open" if position == 0 else "waiting", create_time=now,
            )
        )  # fmt: skip


def end_tasks(session: Session, job: JobRow, status: str) -> None:
    """End every task of the job's current attempt that has not ended."""
    now = utcnow()
    for task in session.scalars(
        sa.select(TaskRow).where(
            TaskRow.job_id == job.id,
            TaskRow.attempt_number == job.attempt_count,
            TaskRow.status.not_in(TASK_ENDED),
        )
    ):
        task.status, task.end_time = status, now


def check_job_move(current: str, target: str) -> bool:
    """True when the move changes the state, False for a same-state replay; raises
    INVALID_TRANSITION for anything else."""
    if target not in JOB_STATES:
        raise ValueError("unknown job state")
    if current == target:
        return False
    if target not in JOB_MOVES[current]:
        raise errors.InvalidTransition()
    return True


def cancel_plan(status: str, *, held: bool = False) -> str:
    """What a cancel does from `status`: `now` (nothing runs: cancelled at once),
    `cooperative` (an executor holds the task: the cancel reaches it through `cancelling`,
    and a trainer saves what it trained), or `noop`. `held` says whether an executor holds
    one of the job's tasks. Raises JOB_FINALIZING or INVALID_TRANSITION where a cancel is
    refused."""
    if status == "queued" or (status == "preparing" and not held):
        return "now"
    if status in ("preparing", "running", "evaluating"):
        return "cooperative"
    if status in ("cancelling", "cancelled"):
        return "noop"
    if status == "finalizing":
        raise errors.FailedPrecondition(
            "The job is finalizing; there is nothing left to stop.", reason="JOB_FINALIZING"
        )
    raise errors.InvalidTransition("The job has ended and cannot be cancelled.")


def held(session: Session, job: JobRow) -> bool:
    """Whether an executor holds a task of the job's current attempt."""
    return (
        session.scalar(
            sa.select(TaskRow.id)
            .where(
                TaskRow.job_id == job.id,
                TaskRow.attempt_number == job.attempt_count,
                TaskRow.status == "leased",
            )
            .limit(1)
        )
        is not None
    )


def check_attempt_move(current: str, target: str) -> bool:
    if target not in ATTEMPT_MOVES:
        raise ValueError("unknown attempt state")
    if current == target:
        return False
    if target not in ATTEMPT_MOVES[current]:
        raise errors.InvalidTransition()
    return True


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


def move_attempt(
    session: Session,
    job: JobRow,
    attempt: AttemptRow,
    target: str,
    *,
    failure: tuple[str, str, str] | None = None,
) -> bool:
    if not check_attempt_move(attempt.status, target):
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


def move_job(
    session: Session,
    job: JobRow,
    target: str,
    *,
    reason: str = "",
    failure: tuple[str, str, str] | None = None,
    actor: str = "",
    request_id: str = "",
) -> bool:
    """Move a job, stamping its times, appending a `transition` event and an audit row,
    all in the caller's transaction. Returns False for a same-state replay."""
    if not check_job_move(job.status, target):
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


def reopen_for_retry(
    session: Session, job: JobRow, attempt: AttemptRow, *, actor: str = ""
) -> None:
    """The one exception to terminal states: a retry puts the job back in the queue as a
    new attempt, keeping its frozen spec and snapshot."""
    if job.status not in RETRYABLE:
        raise errors.InvalidTransition()
    previous, job.status = job.status, "queued"
    job.attempt_count = attempt.attempt_number
    job.end_time = None
    job.failure_code = job.failure_category = job.failure_message = ""
    job.progress = None
    job.outcome = None
    append_event(
        session, job, "transition", attempt=attempt.attempt_number, status="queued",
        previous_status=previous, reason="retry_requested",
    )  # fmt: skip
    audit.record(
        session, "training.job.retry.accepted", org=job.org, subject=job.id, actor=actor,
        code=f"{previous}->queued", attempt=attempt.attempt_number,
    )  # fmt: skip


def tombstone(session: Session, job: JobRow) -> None:
    """What is left of a job once its artifact is deleted (`001_…`): its id, number,
    status and times; no request, dataset, model, parameters or hashes. The snapshot it
    read goes too, unless another job still reads it."""
    from services.jobs.store import SnapshotRow  # the snapshot is JobService's table

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
