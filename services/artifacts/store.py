"""Tables ArtifactService owns: org keys, objects, job artifacts, provenance records."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import lifecycle
from services.core.store import Base, UtcDateTime


class OrgKeyRow(Base):
    """An org's data key, wrapped under the master key."""

    __tablename__ = "org_keys"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    wrapped: Mapped[bytes] = mapped_column(sa.LargeBinary())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class ObjectRow(Base):
    """One object of an org, named by the sha256 of its bytes. The row goes with the
    bytes: a deleted object leaves no trace of its hash."""

    __tablename__ = "objects"
    __table_args__ = (
        sa.UniqueConstraint("id", name="uq_objects_id"),
        sa.Index("ix_objects_org_create_time", "org", "create_time"),
    )

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    # A surrogate id, so the audit trail can name the object without its hash.
    id: Mapped[str] = mapped_column(sa.String(32))
    size: Mapped[int] = mapped_column(sa.BigInteger())
    kind: Mapped[str] = mapped_column(sa.String(16))
    name: Mapped[str] = mapped_column(sa.String(128))
    status: Mapped[str] = mapped_column(sa.String(16))
    job_id: Mapped[str] = mapped_column(sa.String(32), default="")
    published: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    retention_policy: Mapped[str] = mapped_column(sa.String(16), default="default")
    ttl_seconds: Mapped[int | None] = mapped_column(sa.BigInteger(), nullable=True)
    upload_id: Mapped[str] = mapped_column(sa.String(256), default="")
    meta: Mapped[dict[str, Any]] = mapped_column(sa.JSON(), default=dict)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    grant_expires: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    stored_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class JobArtifactRow(Base):
    """An object a job produced."""

    __tablename__ = "job_artifacts"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    job_id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16))
    name: Mapped[str] = mapped_column(sa.String(128))
    provenance_record_id: Mapped[str] = mapped_column(sa.String(32), default="")
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


def in_use(session: Session, org: str, sha256: str) -> bool:
    """Whether a job that has not ended reads the object: the upload its dataset names
    (HIP-1333 §6), or the snapshot it trains on."""
    job = lifecycle.JobRow
    return (
        session.scalar(
            sa.select(job.id)
            .where(
                job.org == org,
                sa.or_(job.reads_sha256 == sha256, job.dataset_sha256 == sha256),
                job.status.not_in(lifecycle.TERMINAL),
            )
            .limit(1)
        )
        is not None
    )


def readable(session: Session, row: ObjectRow | None, now: dt.datetime) -> bool:
    """Stored and not past its retention, evaluated on every read: an expired object
    reads as gone before the sweep deletes it, unless it is published or in use."""
    if row is None or row.status != "stored":
        return False
    if row.expires_at is None or row.expires_at > now or row.published:
        return True
    return in_use(session, row.org, row.sha256)
