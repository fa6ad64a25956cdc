"""How JobService's answers read: the shared job view with where a waiting job stands in
its queue and a preview of the rows the job trained on, and its attempts, events and
dataset items as protos."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.core import view
from services.core.store import utcnow
from services.core.tables import AttemptRow, EventRow, JobRow, SnapshotItemRow
from services.jobs import snapshots, store
from services.jobs.queue import QueueReader
from trainyard.job.v1 import attempt_pb2, event_pb2, job_pb2
from trainyard.training.catalog import Catalog

PREVIEW_ITEMS = 50
# A preview (a job's `chats`, a page of its dataset) shows each example's first messages,
# each cut, so a page of 200 stays well inside one gRPC message; an item's own read
# (GetJobDatasetItem) answers them whole.
PREVIEW_MESSAGES, PREVIEW_CHARS = 8, 300
ts = view.ts


def job_protos(session: Session, rows: Sequence[JobRow], catalog: Catalog) -> list[job_pb2.Job]:
    """The jobs as read, each waiting one with where it stands in its queue."""
    jobs = view.job_protos(session, rows)
    queue = QueueReader(session, catalog, utcnow())
    for row, job in zip(rows, jobs, strict=True):
        if (found := queue.position(row)) is not None:
            job.queue.CopyFrom(found)
    return jobs


def job_proto(
    session: Session, row: JobRow, catalog: Catalog, *, preview: bool = False
) -> job_pb2.Job:
    """The job as read, with where it stands in its queue while it waits; a single job's
    read (`preview`) adds the first rows it trained on and the objects it holds (HIP-1333
    §2: "its spec, status, result, artifacts")."""
    job = job_protos(session, [row], catalog)[0]
    if preview:
        if row.dataset_sha256:
            _preview(session, row, job)
        for link, obj in store.job_artifacts(session, row.org, row.id, utcnow()):
            job.artifacts.add(sha256=obj.sha256, kind=link.kind, name=link.name, size=obj.size)
    return job


def _preview(session: Session, row: JobRow, job: job_pb2.Job) -> None:
    snap = snapshots.snapshot(session, row.org, row.dataset_sha256)
    if snap is None:
        return
    items = snapshots.snapshot_items(session, row.org, row.dataset_sha256, limit=PREVIEW_ITEMS)
    job.chats.extend(item_proto(i, messages="preview") for i in items)
    job.chat_count, job.message_count = snap.item_count, snap.message_count
    job.chats_truncated = snap.item_count > len(items)


def item_proto(
    item: SnapshotItemRow, *, messages: Literal["preview", "whole"]
) -> job_pb2.DatasetItem:
    out = job_pb2.DatasetItem(
        id=item.item_id, name=item.name, message_count=item.message_count, split=item.split
    )
    if messages == "whole":
        out.messages.extend(
            job_pb2.Message(role=m["role"], content=m["content"]) for m in item.messages
        )
    else:
        out.messages.extend(
            job_pb2.Message(role=m["role"], content=_cut(m["content"]))
            for m in item.messages[:PREVIEW_MESSAGES]
        )
    return out


def _cut(content: str) -> str:
    return content if len(content) <= PREVIEW_CHARS else content[: PREVIEW_CHARS - 1] + "…"


def attempt_proto(row: AttemptRow, log_bytes: int = 0) -> attempt_pb2.Attempt:
    out = attempt_pb2.Attempt(
        log_bytes=log_bytes,
        id=row.id,
        job_id=row.job_id,
        attempt_number=row.attempt_number,
        status=row.status,
        resume_from_checkpoint=row.resume_from_checkpoint,
        failure_code=row.failure_code,
        failure_category=row.failure_category,
        failure_message=row.failure_message,
    )
    if row.resume_step is not None:
        out.resume_step = row.resume_step
    for name in ("create_time", "leased_time", "started_time", "finalizing_time", "end_time"):
        if (value := getattr(row, name)) is not None:
            getattr(out, name).CopyFrom(ts(value))
    return out


def event_proto(row: EventRow) -> event_pb2.JobEvent:
    out = event_pb2.JobEvent(seq=row.seq, type=row.type, attempt_number=row.attempt_number)
    json_format.ParseDict(row.data, out, ignore_unknown_fields=True)
    out.create_time.CopyFrom(ts(row.create_time))
    return out
