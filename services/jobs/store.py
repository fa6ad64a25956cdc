"""JobService's table (idempotency keys) and the queries it runs, on its own table and on
the shared ones (`services.core.tables`). Each function runs in its caller's unit of work;
the use cases decide, these read and write rows. A job is always looked up within an org.
A dataset's snapshots have theirs in `services.jobs.snapshots`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import context, errors, ids, lifecycle
from services.core.object_tables import JobArtifactRow, ObjectRow, PublicationRow, readable
from services.core.states import TERMINAL, AttemptStatus, JobStatus, PreparationStatus
from services.core.store import Base, UtcDateTime, utcnow
from services.core.tables import AttemptRow, EventRow, JobRow, MetricRow, attempts_read

CREATE_JOB = "CreateJob"


class IdempotencyKey(Base):
    """A key used on a method in an org, with the shape it was first used with."""

    __tablename__ = "idempotency_keys"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    method: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    request_sha256: Mapped[str] = mapped_column(sa.String(64))
    resource_id: Mapped[str] = mapped_column(sa.String(32))
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class DataSourceRow(Base):
    """An S3 endpoint an org registered, its credentials sealed under a key derived from
    the master key (`data_sources.Sealer`)."""

    __tablename__ = "data_sources"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    endpoint: Mapped[str] = mapped_column(sa.String(2048))
    region: Mapped[str] = mapped_column(sa.String(64))
    sealed: Mapped[bytes] = mapped_column(sa.LargeBinary())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


# -- an org's creates and retries ---------------------------------------------------------


def _org_lock_key(org: str) -> int:
    return int.from_bytes(hashlib.sha256(org.encode()).digest()[:8], "big", signed=True)


def lock_org(session: Session, org: str) -> None:
    """Serialise an org's creates and retries (its queue limit and numbering). SQLite's
    write unit already holds the one write lock."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _org_lock_key(org)})


def open_jobs(session: Session, org: str) -> int:
    """How many of the org's jobs have not ended."""
    count = session.scalar(
        sa.select(sa.func.count())
        .select_from(JobRow)
        .where(JobRow.org == org, JobRow.status.not_in(TERMINAL))
    )
    return count or 0


# Built once: the org and project are its parameters.
_OPEN_AND_NEXT = sa.select(
    sa.select(sa.func.count())
    .select_from(JobRow)
    .where(JobRow.org == sa.bindparam("org"), JobRow.status.not_in(TERMINAL))
    .scalar_subquery(),
    sa.select(sa.func.max(JobRow.number))
    .where(JobRow.org == sa.bindparam("org"), JobRow.project == sa.bindparam("project"))
    .scalar_subquery(),
)


def open_and_next(session: Session, org: str, project: str) -> tuple[int, int]:
    """How many of the org's jobs have not ended, and the number the project's next job
    takes (one past the highest, never reused): one statement."""
    count, number = session.execute(_OPEN_AND_NEXT, {"org": org, "project": project}).one()
    return count or 0, (number or 0) + 1


def used_key(session: Session, org: str, key: str) -> IdempotencyKey | None:
    return session.get(IdempotencyKey, (org, CREATE_JOB, key))


def add_job(
    session: Session,
    *,
    job_id: str,
    org: str,
    project: str,
    number: int,
    requested_by: str,
    spec: dict[str, Any],
    spec_sha256: str,
    plan: dict[str, Any],
    reads_sha256: str,
    from_sha256: str = "",
    key: str,
    shape_sha256: str,
    now: dt.datetime,
    key_id: str = "",
) -> JobRow:
    """A new job in its first state and its event, with its first attempt and, under a
    key, the key: added, not flushed. The caller's unit flushes the job alone before the
    rest (`session.flush([row])`), as what refers to it must follow it and the ORM learns
    that order only from relationships, which these tables do not declare; the job is
    then inserted once, in the state the unit left it."""
    row = JobRow(
        id=job_id,
        org=org,
        project=project,
        number=number,
        status=JobStatus.QUEUED,
        spec=spec,
        spec_sha256=spec_sha256,
        plan=plan,
        preparation={"status": str(PreparationStatus.QUEUED)},
        requested_by=requested_by,
        attempt_count=1,
        event_seq=0,
        reads_sha256=reads_sha256,
        from_sha256=from_sha256,
        key_id=key_id,
        create_time=now,
        update_time=now,
        # What the insert would default, read before it (its create's answer).
        dataset_sha256="",
        model_available=False,
        failure_code="",
        failure_category="",
        failure_message="",
        deleted=False,
    )
    session.add(row)
    lifecycle.append_event(
        session, row, "transition", attempt=1, status=JobStatus.QUEUED, reason="created"
    )
    attempt = AttemptRow(
        id=ids.new_id("att"),
        job_id=job_id,
        org=org,
        attempt_number=1,
        status=AttemptStatus.QUEUED,
        create_time=now,
    )
    session.add(attempt)
    attempts_read(session)[job_id, 1] = attempt
    if key:
        session.add(
            IdempotencyKey(
                org=org,
                method=CREATE_JOB,
                key=key,
                request_sha256=shape_sha256,
                resource_id=job_id,
                create_time=now,
            )
        )
    return row


# -- one job ------------------------------------------------------------------------------


def owned_job(session: Session, org: str, job_id: str, *, lock: bool = False) -> JobRow:
    """The org's job; another org's answers exactly as an unknown one. `lock` holds the row
    until the unit ends, so a writer's events follow each other in order."""
    row = session.get(JobRow, job_id, with_for_update=lock) if ids.is_id(job_id, "job") else None
    if row is None or row.org != org or not context.sees_project(row.project):
        raise errors.NotFound()
    return row


def job_by_number(session: Session, org: str, project: str, number: int) -> JobRow | None:
    return session.scalar(
        sa.select(JobRow).where(
            JobRow.org == org, JobRow.project == project, JobRow.number == number
        )
    )


def job_by_id(session: Session, job_id: str, *, lock: bool = False) -> JobRow | None:
    """A job by an id the service itself holds (a key's record, the preparer's pick), so in
    no org's name."""
    return session.get(JobRow, job_id, with_for_update=lock)


# -- lists --------------------------------------------------------------------------------


def _job_filter(
    org: str, status: str, project: str, within: Sequence[str]
) -> list[sa.ColumnElement[bool]]:
    """`within`: the projects a limited key sees (empty: every project)."""
    where = [JobRow.org == org]
    if status:
        where.append(JobRow.status == status)
    if project:
        where.append(JobRow.project == project)
    if within:
        where.append(JobRow.project.in_(within))
    return where


def count_jobs(
    session: Session, org: str, *, status: str, project: str, within: Sequence[str] = ()
) -> int:
    where = _job_filter(org, status, project, within)
    return session.scalar(sa.select(sa.func.count()).select_from(JobRow).where(*where)) or 0


def jobs_page(
    session: Session,
    org: str,
    *,
    status: str,
    project: str,
    after: tuple[dt.datetime, str] | None,
    limit: int,
    within: Sequence[str] = (),
) -> Sequence[JobRow]:
    """Newest first, from after `(create_time, id)` when given; `limit` rows at most."""
    query = sa.select(JobRow).where(*_job_filter(org, status, project, within))
    if after is not None:
        time, job_id = after
        query = query.where(
            # The bound alone seeks the (org, create_time) index to the page; without it
            # PostgreSQL reads and drops every newer job first.
            JobRow.create_time <= time,
            sa.or_(
                JobRow.create_time < time,
                sa.and_(JobRow.create_time == time, JobRow.id < job_id),
            ),
        )
    return session.scalars(
        query.order_by(JobRow.create_time.desc(), JobRow.id.desc()).limit(limit)
    ).all()


def events_after(session: Session, job_id: str, after: int, limit: int) -> Sequence[EventRow]:
    return session.scalars(
        sa.select(EventRow)
        .where(EventRow.job_id == job_id, EventRow.seq > after)
        .order_by(EventRow.seq)
        .limit(limit)
    ).all()


def last_event_seq(session: Session, job_id: str) -> int:
    return (
        session.scalar(sa.select(sa.func.max(EventRow.seq)).where(EventRow.job_id == job_id)) or 0
    )


def job_artifacts(
    session: Session, org: str, job_id: str, now: dt.datetime
) -> list[tuple[JobArtifactRow, ObjectRow]]:
    """The objects the job holds that a read may see (stored, within their retention),
    oldest first, each with the name the job gave it."""
    rows = session.execute(
        sa.select(JobArtifactRow, ObjectRow)
        .join(
            ObjectRow,
            sa.and_(ObjectRow.org == JobArtifactRow.org, ObjectRow.sha256 == JobArtifactRow.sha256),
        )
        .where(JobArtifactRow.org == org, JobArtifactRow.job_id == job_id)
        .order_by(JobArtifactRow.create_time, JobArtifactRow.sha256)
    ).all()
    return [(link, obj) for link, obj in rows if readable(session, obj, now)]


def metric_points(
    session: Session, job_id: str, *, names: list[str], after_step: int
) -> Sequence[sa.Row[tuple[str, int, float, dt.datetime, int]]]:
    """(name, step, value, create_time, attempt_number) by name, then attempt, then step:
    plain rows, so a series of 100,000 points reads without building an object per point."""
    m = MetricRow
    query = sa.select(m.name, m.step, m.value, m.create_time, m.attempt_number).where(
        m.job_id == job_id, m.step > after_step
    )
    if names:
        query = query.where(m.name.in_(names))
    return session.execute(query.order_by(m.name, m.attempt_number, m.step)).all()


def metric_attempts(session: Session, job_id: str) -> list[int]:
    """The attempts of the job that reported any metric point."""
    m = MetricRow
    return list(session.scalars(sa.select(m.attempt_number).where(m.job_id == job_id).distinct()))


def attempts(session: Session, job_id: str) -> Sequence[AttemptRow]:
    return session.scalars(
        sa.select(AttemptRow).where(AttemptRow.job_id == job_id).order_by(AttemptRow.attempt_number)
    ).all()


def attempt_by_key(session: Session, job_id: str, key: str) -> AttemptRow | None:
    """The attempt a retry with `key` started, if one did."""
    return session.scalar(
        sa.select(AttemptRow).where(AttemptRow.job_id == job_id, AttemptRow.idempotency_key == key)
    )


def add_attempt(
    session: Session, job: JobRow, *, key: str, resume: bool, resume_step: int | None
) -> AttemptRow:
    """The job's next attempt, queued; `lifecycle.requeue` moves the job to it."""
    attempt = AttemptRow(
        id=ids.new_id("att"),
        job_id=job.id,
        org=job.org,
        attempt_number=job.attempt_count + 1,
        status=AttemptStatus.QUEUED,
        idempotency_key=key,
        resume_from_checkpoint=resume,
        resume_step=resume_step,
        create_time=utcnow(),
    )
    session.add(attempt)
    session.flush()
    return attempt


# -- preparation --------------------------------------------------------------------------


def next_to_prepare(session: Session, stalled_before: dt.datetime) -> JobRow | None:
    """The oldest queued job, or one whose snapshotting has been quiet since
    `stalled_before`; locked, skipping a row another preparer holds."""
    return session.scalar(
        sa.select(JobRow)
        .where(
            sa.or_(
                JobRow.status == JobStatus.QUEUED,
                sa.and_(
                    JobRow.status == JobStatus.PREPARING,
                    JobRow.dataset_sha256 == "",
                    JobRow.update_time < stalled_before,
                ),
            )
        )
        .order_by(JobRow.create_time)
        .limit(1)
        .with_for_update(skip_locked=True)
    )


# -- publications -------------------------------------------------------------------------


def lock_publications(session: Session, org: str) -> None:
    """Serialise an org's publishes, so two that claim one question cannot both pass the
    conflict check. SQLite's write unit already holds the one write lock."""
    if session.get_bind().dialect.name == "postgresql":
        key = _org_lock_key(f"publish:{org}")
        session.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})


def lock_object(session: Session, org: str, sha256: str) -> ObjectRow | None:
    """The object a publish names, locked as ArtifactService's delete locks it before its
    last check, so the two cannot pass each other."""
    return session.get(ObjectRow, (org, sha256), with_for_update=True)


def publication(session: Session, org: str, name: str) -> PublicationRow | None:
    return session.get(PublicationRow, (org, name), with_for_update=True)


def capabilities_of(session: Session, org: str) -> Sequence[PublicationRow]:
    """The org's published capabilities."""
    return session.scalars(
        sa.select(PublicationRow).where(
            PublicationRow.org == org, PublicationRow.kind == "capability"
        )
    ).all()


def every_capability(session: Session) -> Sequence[PublicationRow]:
    """Every org's published capabilities, by org and name."""
    return session.scalars(
        sa.select(PublicationRow)
        .where(PublicationRow.kind == "capability")
        .order_by(PublicationRow.org, PublicationRow.name)
    ).all()
