"""ClaimService's table (the executors it has seen) and every query it makes of the tasks,
jobs and metrics the lifecycle shares.

Row locks follow one order: a writer locks a job before its tasks. A claim and the sweep
find tasks first, so they take the job without waiting (`SKIP LOCKED`) or leave it."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import ids
from services.core.states import STOPPING, JobStatus, TaskStatus
from services.core.store import Base, UtcDateTime, retrying
from services.core.tables import AttemptRow, JobRow, TaskRow, attempts_read

T = TypeVar("T")
# The jobs whose open tasks an executor may claim.
CLAIMABLE = (JobStatus.PREPARING, JobStatus.RUNNING)


class ExecutorRow(Base):
    """An executor that said hello: where it runs and what it can train."""

    __tablename__ = "executors"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    key_id: Mapped[str] = mapped_column(sa.String(32))
    machine: Mapped[str] = mapped_column(sa.String(63))
    platform: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    offer: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    connected: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    last_seen: Mapped[dt.datetime] = mapped_column(UtcDateTime())


def retry(work: Callable[[], T]) -> T:
    """Run a unit of work again when a concurrent writer won: reports, claims and the
    sweep contend for the same task rows most of all."""
    return retrying(work, attempts=8)


# -- lookups --------------------------------------------------------------------------------


def task(session: Session, task_id: str, *, lock: bool = False) -> TaskRow | None:
    """A task by its id (None for anything that is not a task id); `lock` takes its row
    and reads it afresh."""
    if not ids.is_id(task_id, "tsk"):
        return None
    return session.get(TaskRow, task_id, with_for_update=lock, populate_existing=lock)


def job(session: Session, job_id: str, *, lock: bool = False) -> JobRow | None:
    return session.get(JobRow, job_id, with_for_update=lock)


def job_unless_locked(session: Session, job_id: str) -> JobRow | None:
    """The job locked, its current attempt read with it (`attempts_read`), or None while
    another writer holds it."""
    found = session.execute(
        sa.select(JobRow, AttemptRow)
        .outerjoin(
            AttemptRow,
            sa.and_(
                AttemptRow.job_id == JobRow.id, AttemptRow.attempt_number == JobRow.attempt_count
            ),
        )
        .where(JobRow.id == job_id)
        .with_for_update(skip_locked=True, of=JobRow)
    ).first()
    if found is None:
        return None
    job, attempt = found
    if attempt is not None:
        attempts_read(session)[job.id, attempt.attempt_number] = attempt
    return job


def lead_of(session: Session, join: TaskRow) -> TaskRow | None:
    """The lead task of a join's attempt."""
    return session.scalar(
        sa.select(TaskRow).where(
            TaskRow.job_id == join.job_id,
            TaskRow.attempt_number == join.attempt_number,
            TaskRow.position == 0,
        )
    )


def executor(session: Session, executor_id: str) -> ExecutorRow | None:
    return session.get(ExecutorRow, executor_id)


# -- the work the service hands out ---------------------------------------------------------


# The claim's statements are built once each (by whose executor claims) and take the org
# and machine as parameters: building and keying a statement of three joins cost more than
# SQLite took to run it.
_ORG: sa.BindParameter[str] = sa.bindparam("org")
_MACHINE: sa.BindParameter[str] = sa.bindparam("machine")


def _open_tasks(platform: bool) -> sa.Select[tuple[TaskRow]]:
    """The open tasks of current attempts an executor may claim: the platform's, the lead
    tasks no machine was named for in any org; an org's machine's, its org's tasks named
    for it."""
    query = (
        sa.select(TaskRow)
        .join(JobRow, JobRow.id == TaskRow.job_id)
        .where(
            TaskRow.status == TaskStatus.OPEN,
            TaskRow.attempt_number == JobRow.attempt_count,
            JobRow.status.in_(CLAIMABLE),
        )
    )
    if platform:
        return query.where(TaskRow.machine == "", TaskRow.role == "lead")
    return query.where(TaskRow.org == _ORG, TaskRow.machine == _MACHINE)


@functools.cache
def _any_open(platform: bool) -> sa.Select[tuple[bool]]:
    return sa.select(_open_tasks(platform).limit(1).exists())


@functools.cache
def _candidates(platform: bool) -> sa.Select[tuple[TaskRow, JobRow, AttemptRow]]:
    return (
        _open_tasks(platform)
        .add_columns(JobRow, AttemptRow)
        .outerjoin(
            AttemptRow,
            sa.and_(
                AttemptRow.job_id == JobRow.id, AttemptRow.attempt_number == JobRow.attempt_count
            ),
        )
        .order_by(TaskRow.create_time, TaskRow.position)
        .limit(32)
        .with_for_update(skip_locked=True, of=(TaskRow, JobRow))
    )


def any_open_task(session: Session, *, org: str, machine: str, platform: bool) -> bool:
    """Whether a claim could find work: read without a lock, so the executors a wake-up
    woke that have nothing to claim never queue for the write lock."""
    return session.scalar(_any_open(platform), _claimant(org, machine, platform)) or False


def claim_candidates(
    session: Session, *, org: str, machine: str, platform: bool
) -> list[tuple[TaskRow, JobRow]]:
    """The oldest open tasks an executor may claim, each with its job, both locked, and
    the job's current attempt read with them (`attempts_read`): one statement. A task or
    job another writer holds is skipped, not waited for (every other writer locks the job
    before its tasks)."""
    found = []
    for task, job, attempt in session.execute(
        _candidates(platform), _claimant(org, machine, platform)
    ):
        if attempt is not None:
            attempts_read(session)[job.id, attempt.attempt_number] = attempt
        found.append((task, job))
    return found


def _claimant(org: str, machine: str, platform: bool) -> dict[str, str]:
    return {} if platform else {"org": org, "machine": machine}


def lapsed_leases(session: Session, now: dt.datetime, *, limit: int = 100) -> Sequence[TaskRow]:
    """Leased tasks whose lease ran out, locked (those another sweep holds are skipped)."""
    return session.scalars(
        sa.select(TaskRow)
        .where(TaskRow.status == TaskStatus.LEASED, TaskRow.lease_expires <= now)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()


def leased_to(session: Session, executor_id: str) -> Sequence[TaskRow]:
    """The tasks an executor holds the leases of."""
    return session.scalars(
        sa.select(TaskRow)
        .where(TaskRow.executor_id == executor_id, TaskRow.status == TaskStatus.LEASED)
        .order_by(TaskRow.id)
    ).all()


def cancels_due(session: Session, executor_id: str) -> list[tuple[TaskRow, str]]:
    """The executor's leased tasks whose job wants them stopped and that were not told
    yet, each with the job's status."""
    rows = session.execute(
        sa.select(TaskRow, JobRow.status)
        .join(JobRow, JobRow.id == TaskRow.job_id)
        .where(
            TaskRow.executor_id == executor_id,
            TaskRow.status == TaskStatus.LEASED,
            TaskRow.cancel_sent.is_(False),
            JobRow.status.in_(STOPPING),
        )
    ).all()
    return [(row[0], row[1]) for row in rows]
