"""The tables of stored objects that several services read: an org's objects, the objects
its jobs hold, and its publications; and the reads more than one service makes of them
(whether an object is published, in use, readable). Each is written by its owner only —
ArtifactService for objects and what jobs hold, JobService for publications — as
ARCHITECTURE.md §1 says."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core.states import TERMINAL, ObjectStatus
from services.core.store import Base, UtcDateTime
from services.core.tables import JobRow


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
    retention_policy: Mapped[str] = mapped_column(sa.String(16), default="default")
    ttl_seconds: Mapped[int | None] = mapped_column(sa.BigInteger(), nullable=True)
    upload_id: Mapped[str] = mapped_column(sa.String(256), default="")
    meta: Mapped[dict[str, Any]] = mapped_column(sa.JSON(), default=dict)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    grant_expires: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    stored_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    expires_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class JobArtifactRow(Base):
    """An object a job holds: an output it produced, or the snapshot it trained on. Written
    by ArtifactService, which grants and confirms the objects; read by JobService too, as
    a job's read lists what it holds."""

    __tablename__ = "job_artifacts"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    job_id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16))
    name: Mapped[str] = mapped_column(sa.String(128))
    provenance_record_id: Mapped[str] = mapped_column(sa.String(32), default="")
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class PublicationRow(Base):
    """A job's output published under a name of its org (HIP-1333 §6). Written by
    JobService; read by ArtifactService too, which keeps what a publication names."""

    __tablename__ = "publications"
    __table_args__ = (sa.Index("ix_publications_org_sha256", "org", "sha256"),)

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    job_id: Mapped[str] = mapped_column(sa.String(32))
    sha256: Mapped[str] = mapped_column(sa.String(64))
    base_sha256: Mapped[str] = mapped_column(sa.String(64))
    kind: Mapped[str] = mapped_column(sa.String(16))
    # How a capability is served: `head` for a readout, `full` for every other adaptation.
    form: Mapped[str] = mapped_column(sa.String(8))
    # A capability's route (`{"keys": [...], "options": {key: {"type", "labels"}}}`);
    # None for any other output.
    route: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    # A rejected job's output, published with `force`.
    forced: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    publish_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


def publishes(org: Any, sha256: Any) -> sa.Exists:
    """Whether a publication names the object `(org, sha256)`: SQL, for a query that
    keeps what is published."""
    pub = PublicationRow
    return sa.exists().where(pub.org == org, pub.sha256 == sha256)


def published(session: Session, org: str, sha256: str) -> bool:
    """Whether a publication of the org names the object: it is not deleted while one does."""
    return bool(session.scalar(sa.select(publishes(org, sha256))))


def in_use(session: Session, org: str, sha256: str) -> bool:
    """Whether a job that has not ended reads the object: the upload its dataset names or
    the adapter its `from` names (HIP-1333 §6), or the snapshot it trains on."""
    job = JobRow
    return (
        session.scalar(
            sa.select(job.id)
            .where(
                job.org == org,
                sa.or_(
                    job.reads_sha256 == sha256,
                    job.from_sha256 == sha256,
                    job.dataset_sha256 == sha256,
                ),
                job.status.not_in(TERMINAL),
            )
            .limit(1)
        )
        is not None
    )


def readable(session: Session, row: ObjectRow | None, now: dt.datetime) -> bool:
    """Stored and not past its retention, evaluated on every read: an expired object
    reads as gone before the sweep deletes it, unless it is published or in use."""
    if row is None or row.status != ObjectStatus.STORED:
        return False
    if row.expires_at is None or row.expires_at > now:
        return True
    return published(session, row.org, row.sha256) or in_use(session, row.org, row.sha256)
