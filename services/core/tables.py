"""The tables several services read: jobs and what hangs off them (attempts, tasks,
events, logs, metrics), dataset snapshots, and training clients with their operations;
stored objects, what jobs hold and publications are in `services.core.object_tables`.
Each is written by its owner only — the lifecycle module for a job's state, JobService
for snapshots — as ARCHITECTURE.md §1 says; a service's own tables live in its
`store.py`."""

from __future__ import annotations

import collections
import datetime as dt
import threading
from typing import Any

import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core.store import Base, UtcDateTime
from trainyard.job.v1 import job_pb2
from trainyard.training.planning import FrozenPlan


class JobRow(Base):
    """A job: its frozen spec and plan, and what became of it."""

    __tablename__ = "jobs"
    __table_args__ = (
        sa.UniqueConstraint("org", "project", "number", name="uq_jobs_org_project_number"),
        sa.Index("ix_jobs_org_create_time", "org", "create_time"),
        sa.Index("ix_jobs_org_status", "org", "status"),
        sa.Index("ix_jobs_status_create_time", "status", "create_time"),
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
    # The sha256 of the adapter the job starts from (its `from`), which it reads too.
    from_sha256: Mapped[str] = mapped_column(
        sa.String(64), default="", server_default="", index=True
    )
    model_available: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    failure_code: Mapped[str] = mapped_column(sa.String(64), default="")
    failure_category: Mapped[str] = mapped_column(sa.String(16), default="")
    failure_message: Mapped[str] = mapped_column(sa.String(256), default="")
    attempt_count: Mapped[int] = mapped_column(sa.Integer(), default=1)
    event_seq: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    requested_by: Mapped[str] = mapped_column(sa.String(64), default="")
    # The id of the API key that created it: the key's monthly spend bounds the job's.
    key_id: Mapped[str] = mapped_column(sa.String(32), default="", server_default="", index=True)
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

    def frozen(self) -> job_pb2.Job:
        """The frozen spec, typed: the one way code reads it. Fields a later version
        dropped are ignored, so an old row still reads; a tombstone reads empty."""
        job = job_pb2.Job()
        if self.spec and self.spec_sha256:
            job.CopyFrom(_parsed_spec(self.spec_sha256, self.spec))
        elif self.spec:
            json_format.ParseDict(self.spec, job, ignore_unknown_fields=True)
        return job

    def planned(self) -> FrozenPlan:
        """The plan the create froze, typed: the one way code reads it."""
        return FrozenPlan.from_json(self.plan or {})


# A job's labels: they name or file it but do not change what it trains, so its spec holds
# them and its `spec_sha256` (the training config's hash) does not.
SPEC_LABELS = ("idempotency_key", "requested_by", "project")

# Frozen specs parsed, by their training config's sha256 and their labels: a spec never
# changes, and parsing one is most of what reading a page of jobs costs.
_SPECS: collections.OrderedDict[tuple[str, ...], job_pb2.Job] = collections.OrderedDict()
_SPECS_KEPT = 4096


_SPECS_LOCK = threading.Lock()


def _parsed_spec(sha256: str, spec: dict[str, Any]) -> job_pb2.Job:
    """The spec parsed, kept read-only (callers copy it). Two jobs that train alike share
    the sha256, whichever org made them: the labels are part of the key."""
    key = (sha256, *(str(spec.get(name, "")) for name in SPEC_LABELS))
    with _SPECS_LOCK:
        if (found := _SPECS.get(key)) is not None:
            _SPECS.move_to_end(key)
            return found
    parsed = json_format.ParseDict(spec, job_pb2.Job(), ignore_unknown_fields=True)
    with _SPECS_LOCK:
        _SPECS[key] = parsed
        if len(_SPECS) > _SPECS_KEPT:
            _SPECS.popitem(last=False)
    return parsed


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


def attempts_read(session: Session) -> dict[tuple[str, int], AttemptRow]:
    """The attempts a unit of work read or made, by job and number: a job's current one
    is read once a unit, not again by each move and view that needs it."""
    return session.info.setdefault("attempts", {})  # type: ignore[no-any-return]


class EventRow(Base):
    """One entry of a job's ordered, durable record."""

    __tablename__ = "job_events"

    # No foreign key: written only under the job's row lock, and jobs are never deleted
    # (migration 0016: its per-row check was a third of a report's commit).
    job_id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(sa.BigInteger(), primary_key=True, autoincrement=False)
    org: Mapped[str] = mapped_column(sa.String(63))
    type: Mapped[str] = mapped_column(sa.String(16))
    attempt_number: Mapped[int] = mapped_column(sa.Integer(), default=0)
    # The event's typed fields (status, reason, name, step, value, line, sha256).
    data: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class AttemptLogRow(Base):
    """A piece of an attempt's log (its trainer's standard output and error) at its byte
    offset in the whole; the pieces in offset order are the log. Written by the lifecycle
    module as the task's reports are applied."""

    __tablename__ = "attempt_logs"

    # No foreign key, as `EventRow`'s.
    job_id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    attempt_number: Mapped[int] = mapped_column(sa.Integer(), primary_key=True, autoincrement=False)
    offset: Mapped[int] = mapped_column(sa.BigInteger(), primary_key=True, autoincrement=False)
    org: Mapped[str] = mapped_column(sa.String(63))
    text: Mapped[str] = mapped_column(sa.Text())
    # The piece's UTF-8 bytes and its line ends, so ranges are found without reading it.
    size: Mapped[int] = mapped_column(sa.Integer())
    lines: Mapped[int] = mapped_column(sa.Integer())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class MetricRow(Base):
    """One point of a job's metric series."""

    __tablename__ = "job_metrics"

    # No foreign key, as `EventRow`'s.
    job_id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
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


class SnapshotRow(Base):
    """An immutable dataset snapshot of an org, named by the sha256 of its JSON Lines."""

    __tablename__ = "snapshots"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    item_count: Mapped[int] = mapped_column(sa.Integer())
    message_count: Mapped[int] = mapped_column(sa.Integer())
    size: Mapped[int] = mapped_column(sa.BigInteger())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class SnapshotItemRow(Base):
    """One example of a snapshot, with its frozen split."""

    __tablename__ = "snapshot_items"
    __table_args__ = (
        sa.ForeignKeyConstraint(
            ["org", "snapshot_sha256"],
            ["snapshots.org", "snapshots.sha256"],
            name="fk_snapshot_items_snapshot",
            ondelete="CASCADE",
        ),
        sa.Index("ix_snapshot_items_item", "org", "snapshot_sha256", "item_id"),
    )

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    snapshot_sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    position: Mapped[int] = mapped_column(sa.Integer(), primary_key=True, autoincrement=False)
    item_id: Mapped[str] = mapped_column(sa.String(160))
    name: Mapped[str] = mapped_column(sa.String(200))
    split: Mapped[str] = mapped_column(sa.String(8))
    message_count: Mapped[int] = mapped_column(sa.Integer())
    messages: Mapped[list[dict[str, Any]]] = mapped_column(sa.JSON())
    # Lower-cased title and message text, for `search`.
    search_text: Mapped[str] = mapped_column(sa.Text())


class ClientRow(Base):
    """A training client: where it is held, under which lease, and what it did so far."""

    __tablename__ = "clients"
    __table_args__ = (
        sa.Index("ix_clients_org_create_time", "org", "create_time"),
        sa.Index("ix_clients_executor_id_status", "executor_id", "status"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    base_model: Mapped[str] = mapped_column(sa.String(128))
    adaptation: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    protect: Mapped[dict[str, Any]] = mapped_column(sa.JSON(), default=dict)
    seed: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    # `placing`, `ready`, `failed`, `lost` or `deleted`.
    status: Mapped[str] = mapped_column(sa.String(16))
    reason: Mapped[str] = mapped_column(sa.String(32), default="")
    message: Mapped[str] = mapped_column(sa.String(256), default="")
    executor_id: Mapped[str] = mapped_column(sa.String(32))
    # Whether its engine is the platform's: its operations are charged.
    charged: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    lease_sha256: Mapped[str] = mapped_column(sa.String(64), default="")
    epoch: Mapped[int] = mapped_column(sa.Integer(), default=0)
    lease_expires: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    seq: Mapped[int] = mapped_column(sa.Integer(), default=-1)
    step: Mapped[int] = mapped_column(sa.Integer(), default=0)
    # [[seq, step, loss], ...] of each forward_backward.
    losses: Mapped[list[Any]] = mapped_column(sa.JSON(), default=list)
    engine_seconds: Mapped[float] = mapped_column(sa.Float(), default=0.0)
    cost_micro_cents: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    update_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class OperationRow(Base):
    """One call on a client, by its sequence number: `queued`, `sent` to the engine, then
    `done` with its output or `failed` with its error."""

    __tablename__ = "client_operations"
    __table_args__ = (
        sa.UniqueConstraint("client_id", "seq", name="uq_client_operations_client_id_seq"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    client_id: Mapped[str] = mapped_column(sa.String(32))
    seq: Mapped[int] = mapped_column(sa.Integer())
    kind: Mapped[str] = mapped_column(sa.String(16))
    input: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    input_sha256: Mapped[str] = mapped_column(sa.String(64))
    status: Mapped[str] = mapped_column(sa.String(16), default="queued")
    output: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(), nullable=True)
    seconds: Mapped[float] = mapped_column(sa.Float(), default=0.0)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    done_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
