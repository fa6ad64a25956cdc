"""Tables ArtifactService owns beside the objects (`services.core.tables`): org keys, job
artifacts, provenance records, deletions."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from services.core.store import Base, UtcDateTime


class OrgKeyRow(Base):
    """An org's data key, wrapped under the master key."""

    __tablename__ = "org_keys"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    wrapped: Mapped[bytes] = mapped_column(sa.LargeBinary())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


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
