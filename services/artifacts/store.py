"""ArtifactService's tables beside the shared ones (`services.core.tables`: objects and the
objects jobs hold): org keys, provenance records, deletions; and every query it runs, on
them and on the shared objects, job artifacts and jobs. Each function runs in its caller's
unit of work: the use cases decide, these read and write rows. An object is always looked
up within an org."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column
from sqlalchemy.orm.exc import StaleDataError

from services.core import context, errors, ids, limits
from services.core.object_tables import JobArtifactRow, ObjectRow, publishes, readable
from services.core.states import ObjectStatus
from services.core.store import Base, UtcDateTime, retrying
from services.core.tables import ClientRow, JobRow

T = TypeVar("T")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# The kinds of object: what an org uploads itself, and what a job holds.
USER_KINDS = ("dataset",)
JOB_KINDS = ("snapshot", "checkpoint", "lora", "capability", "basis", "merged")


class OrgKeyRow(Base):
    """An org's data key, wrapped under the master key."""

    __tablename__ = "org_keys"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    wrapped: Mapped[bytes] = mapped_column(sa.LargeBinary())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class ProvenanceRow(Base):
    """The one provenance record of a completed job."""

    __tablename__ = "provenance_records"
    __table_args__ = (sa.UniqueConstraint("job_id", name="uq_provenance_records_job_id"),)

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    job_id: Mapped[str] = mapped_column(sa.String(32))
    dataset_sha256: Mapped[str] = mapped_column(sa.String(64))
    artifact_sha256: Mapped[str] = mapped_column(sa.String(64))
    base_model_id: Mapped[str] = mapped_column(sa.String(128))
    base_model_sha256: Mapped[str] = mapped_column(sa.String(64))
    training_config_sha256: Mapped[str] = mapped_column(sa.String(64))
    created_at: Mapped[str] = mapped_column(sa.String(32))
    schema_version: Mapped[int] = mapped_column(sa.Integer())


class DeletedObjectRow(Base):
    """An object the org deleted, so a repeated DELETE answers as done. Known by a keyed
    digest of its hash, never the hash: the deletion leaves no trace of it."""

    __tablename__ = "deleted_objects"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    digest: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    delete_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


def retry(work: Callable[[], T]) -> T:
    """Run a unit of work again when a concurrent writer won. Two grants may race to create
    an org's key or an object's row: the loser retries."""
    return retrying(work, on=(StaleDataError, IntegrityError))


def is_sha256(value: str) -> bool:
    return bool(SHA256.match(value))


# -- org keys -------------------------------------------------------------------------------


def org_key(session: Session, org: str) -> OrgKeyRow | None:
    return session.get(OrgKeyRow, org)


def add_org_key(session: Session, org: str, wrapped: bytes, now: dt.datetime) -> OrgKeyRow:
    """A new org's key, flushed so a racing grant that made one too fails here."""
    row = OrgKeyRow(org=org, wrapped=wrapped, create_time=now)
    session.add(row)
    session.flush()
    return row


# -- jobs -----------------------------------------------------------------------------------


def owned_job(session: Session, org: str, job_id: str) -> JobRow:
    """The org's job; another org's, or anything that is not a job id, answers exactly as
    an unknown one."""
    row = session.get(JobRow, job_id) if ids.is_id(job_id, "job") else None
    if row is None or row.org != org or not context.sees_project(row.project):
        raise errors.NotFound()
    return row


def owned_producer(session: Session, org: str, producer_id: str) -> JobRow | None:
    """What produced an output of the org: its job, or a training client (whose saved
    adapters are its outputs, the job row None); NOT_FOUND for anything else."""
    client = session.get(ClientRow, producer_id)
    if client is None:
        return owned_job(session, org, producer_id)
    if client.org != org:
        raise errors.NotFound()
    return None


def lock_job(session: Session, job_id: str) -> JobRow | None:
    return session.get(JobRow, job_id, with_for_update=True)


# -- objects --------------------------------------------------------------------------------


def object_row(session: Session, org: str, sha256: str, *, lock: bool = False) -> ObjectRow | None:
    """The org's object in any state (`pending` until its upload reads back)."""
    return session.get(ObjectRow, (org, sha256), with_for_update=lock)


def visible_object(session: Session, org: str, sha256: str, now: dt.datetime) -> ObjectRow:
    """The org's object as a read sees it: retention is evaluated on read, so an expired
    object answers as unknown before the sweep deletes it, as does anything not a hash."""
    if not is_sha256(sha256):
        raise errors.NotFound()
    row = session.get(ObjectRow, (org, sha256))
    if not readable(session, row, now):
        raise errors.NotFound()
    assert row is not None
    if not in_scope(session, row):
        raise errors.NotFound()
    return row


def in_scope(session: Session, row: ObjectRow) -> bool:
    """Whether the request's key sees the object: a key limited to projects does not see
    the outputs of another project's jobs (what the org uploaded has no project)."""
    who = context.principal_var.get()
    if not row.job_id or who is None or not who.projects:
        return True
    job = session.get(JobRow, row.job_id)
    return job is None or who.sees_project(job.project)


def stored_objects(session: Session, org: str, kind: str) -> Sequence[ObjectRow]:
    """The org's stored objects (of `kind`, when given) that the request's key sees,
    newest first."""
    where = [ObjectRow.org == org, ObjectRow.status == ObjectStatus.STORED]
    if kind:
        where.append(ObjectRow.kind == kind)
    rows = session.scalars(
        sa.select(ObjectRow)
        .where(*where)
        .order_by(ObjectRow.create_time.desc(), ObjectRow.sha256.desc())
    ).all()
    return [row for row in rows if in_scope(session, row)]


def pending_bytes(session: Session, org: str, *, besides: str) -> int:
    """The bytes the org was granted and has not confirmed, but for the object `besides`."""
    return limits.pending_bytes(session, org, besides=besides)


def add_placeholder(
    session: Session,
    *,
    org: str,
    sha256: str,
    size: int,
    kind: str,
    name: str,
    job_id: str,
    retention_policy: str,
    ttl_seconds: int | None,
    meta: dict[str, str],
    now: dt.datetime,
) -> ObjectRow:
    """The row of a granted upload, `pending` until it reads back."""
    row = ObjectRow(
        org=org,
        sha256=sha256,
        id=ids.new_id("obj"),
        size=size,
        kind=kind,
        name=name,
        status=ObjectStatus.PENDING,
        job_id=job_id,
        retention_policy=retention_policy,
        ttl_seconds=ttl_seconds,
        meta=meta,
        create_time=now,
    )
    session.add(row)
    return row


def discard(session: Session, row: ObjectRow) -> None:
    """Delete the row now, so a new one may take its key in the same unit."""
    session.delete(row)
    session.flush()


def forget_pending(session: Session, org: str, sha256: str) -> None:
    """Drop an upload that never became an object, and the jobs' claims on it."""
    row = session.get(ObjectRow, (org, sha256))
    if row is not None and row.status == ObjectStatus.PENDING:
        session.delete(row)
        session.execute(
            sa.delete(JobArtifactRow).where(
                JobArtifactRow.org == org, JobArtifactRow.sha256 == sha256
            )
        )


def delete_object(session: Session, org: str, sha256: str) -> None:
    session.execute(sa.delete(ObjectRow).where(ObjectRow.org == org, ObjectRow.sha256 == sha256))


def stale_objects(
    session: Session, now: dt.datetime
) -> Sequence[sa.Row[tuple[str, str, str, str, str]]]:
    """`(org, sha256, status, id, upload_id)` of every lapsed grant and every expired,
    unpinned, unpublished stored object, in all orgs: what the retention sweep may delete
    unless something else keeps it (`object_tables.fate`)."""
    return session.execute(
        sa.select(
            ObjectRow.org,
            ObjectRow.sha256,
            ObjectRow.status,
            ObjectRow.id,
            ObjectRow.upload_id,
        ).where(
            sa.or_(
                sa.and_(ObjectRow.status == ObjectStatus.PENDING, ObjectRow.grant_expires < now),
                sa.and_(
                    ObjectRow.status == ObjectStatus.STORED,
                    ObjectRow.expires_at.is_not(None),
                    ObjectRow.expires_at <= now,
                    ObjectRow.pinned.is_(False),
                    ~publishes(ObjectRow.org, ObjectRow.sha256),
                ),
            )
        )
    ).all()


# -- the objects jobs produced --------------------------------------------------------------


def job_link(session: Session, org: str, job_id: str, sha256: str) -> JobArtifactRow | None:
    """The job's claim to the object, made when it was granted to the job."""
    return session.get(JobArtifactRow, (org, job_id, sha256))


def job_links(session: Session, org: str, job_id: str) -> Sequence[JobArtifactRow]:
    """The objects the job produced, oldest first."""
    return session.scalars(
        sa.select(JobArtifactRow)
        .where(JobArtifactRow.org == org, JobArtifactRow.job_id == job_id)
        .order_by(JobArtifactRow.create_time)
    ).all()


def jobs_of(session: Session, org: str, sha256: str) -> list[str]:
    """The jobs that name the object as one they produced."""
    return list(
        session.scalars(
            sa.select(JobArtifactRow.job_id).where(
                JobArtifactRow.org == org, JobArtifactRow.sha256 == sha256
            )
        )
    )


def links_of_jobs(session: Session, org: str, job_ids: Sequence[str]) -> Sequence[JobArtifactRow]:
    """Every object the jobs produced."""
    return session.scalars(
        sa.select(JobArtifactRow).where(
            JobArtifactRow.org == org, JobArtifactRow.job_id.in_(job_ids)
        )
    ).all()


def drop_job_outputs(session: Session, org: str, job_id: str) -> None:
    """The job's provenance record and its claims to the objects it produced."""
    session.execute(sa.delete(ProvenanceRow).where(ProvenanceRow.job_id == job_id))
    session.execute(
        sa.delete(JobArtifactRow).where(JobArtifactRow.org == org, JobArtifactRow.job_id == job_id)
    )


# -- provenance -----------------------------------------------------------------------------


def provenance_of(session: Session, job_id: str) -> ProvenanceRow | None:
    return session.scalar(sa.select(ProvenanceRow).where(ProvenanceRow.job_id == job_id))


def add_provenance(session: Session, org: str, values: dict[str, Any]) -> ProvenanceRow:
    row = ProvenanceRow(org=org, **values)
    session.add(row)
    return row


# -- deletions ------------------------------------------------------------------------------


def deletion_remembered(session: Session, org: str, digest: str) -> bool:
    return session.get(DeletedObjectRow, (org, digest)) is not None


def remember_deletion(session: Session, org: str, digest: str, now: dt.datetime) -> None:
    if not deletion_remembered(session, org, digest):
        session.add(DeletedObjectRow(org=org, digest=digest, delete_time=now))
