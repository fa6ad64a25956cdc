"""The tables of stored objects that several services read: an org's objects, the objects
its jobs hold, and its publications; and the reads more than one service makes of them
(whether an object is published, in use, kept, readable). Each is written by its owner only —
ArtifactService for objects and what jobs hold, JobService for publications — as
ARCHITECTURE.md §1 says."""

from __future__ import annotations

import dataclasses
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
    # Pinned by the org: never expires while set, whatever `expires_at` says.
    pinned: Mapped[bool] = mapped_column(sa.Boolean(), default=False, server_default=sa.false())


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


def reading_job(session: Session, org: str, sha256: str) -> str | None:
    """A job that has not ended and reads the object: the upload its dataset names or the
    adapter its `from` names (HIP-1333 §6), or the snapshot it trains on; None if none."""
    job = JobRow
    return session.scalar(
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
        .order_by(job.id)
        .limit(1)
    )


def in_use(session: Session, org: str, sha256: str) -> bool:
    """Whether a job that has not ended reads the object (`reading_job`)."""
    return reading_job(session, org, sha256) is not None


# How deep a chain of objects kept by the objects made from them is followed: a snapshot,
# the checkpoint trained on it, the adapter started from that, and a few more.
_KEPT_DEPTH = 8


@dataclasses.dataclass(frozen=True)
class Fate:
    """Whether an object will expire, and why not: the one rule the reads, the retention
    sweep and the scans for objects about to expire all apply."""

    # When retention deletes it unless something keeps it then; None when it never
    # expires or while it is pinned.
    expire_time: dt.datetime | None
    # Why it will not expire now (`pinned`, `published`, `job:<id>`, `object:<sha256>`);
    # empty when nothing keeps it.
    kept_by: str

    def expired(self, at: dt.datetime) -> bool:
        """Whether retention takes it at `at`, were nothing to change before then."""
        return not self.kept_by and self.expire_time is not None and self.expire_time <= at


def fate(session: Session, row: ObjectRow, now: dt.datetime) -> Fate:
    """The object's fate at `now` (see `Fate`)."""
    expire_time = None if row.pinned else row.expires_at
    return Fate(expire_time, _kept_by(session, row, now, frozenset()))


def _kept_by(session: Session, row: ObjectRow, now: dt.datetime, seen: frozenset[str]) -> str:
    if row.pinned:
        return "pinned"
    if published(session, row.org, row.sha256):
        return "published"
    if (job_id := reading_job(session, row.org, row.sha256)) is not None:
        return f"job:{job_id}"
    if len(seen) < _KEPT_DEPTH:
        for made in _made_from(session, row):
            if made.sha256 in seen or made.sha256 == row.sha256:
                continue
            live = made.expires_at is None or made.expires_at > now
            if live or _kept_by(session, made, now, seen | {row.sha256}):
                return f"object:{made.sha256}"
    return ""


def _made_from(session: Session, row: ObjectRow) -> list[ObjectRow]:
    """The org's stored objects whose provenance names the object as input: the outputs
    of the jobs that trained on it (their snapshot) or started from it (their `from`)."""
    made, link, job = ObjectRow, JobArtifactRow, JobRow
    found = session.scalars(
        sa.select(made)
        .join(link, sa.and_(link.org == made.org, link.sha256 == made.sha256))
        .join(job, job.id == link.job_id)
        .where(
            made.org == row.org,
            made.status == ObjectStatus.STORED,
            link.kind != "snapshot",  # what a job trained on, not what it made
            job.org == row.org,
            sa.or_(job.dataset_sha256 == row.sha256, job.from_sha256 == row.sha256),
        )
        .order_by(made.sha256)
    )
    # Several jobs may have made the same bytes: each object once.
    return list({r.sha256: r for r in found}.values())


def readable(session: Session, row: ObjectRow | None, now: dt.datetime) -> bool:
    """Stored and not taken by retention, evaluated on every read: an expired object reads
    as gone before the sweep deletes it, unless something keeps it (`fate`)."""
    if row is None or row.status != ObjectStatus.STORED:
        return False
    if row.pinned or row.expires_at is None or row.expires_at > now:
        return True
    return not fate(session, row, now).expired(now)
