"""How a job reads in JobService's answers: the shared view, with a preview of the rows
the job trained on."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import view
from services.core.tables import JobRow, SnapshotItemRow, SnapshotRow
from trainyard.job.v1 import job_pb2

PREVIEW_ITEMS = 50
ts = view.ts


def job_proto(session: Session, row: JobRow, *, preview: bool = False) -> job_pb2.Job:
    job = view.job_proto(session, row)
    if preview and row.dataset_sha256:
        _preview(session, row, job)
    return job


def _preview(session: Session, row: JobRow, job: job_pb2.Job) -> None:
    snap = session.get(SnapshotRow, (row.org, row.dataset_sha256))
    if snap is None:
        return
    items = session.scalars(
        sa.select(SnapshotItemRow)
        .where(
            SnapshotItemRow.org == row.org,
            SnapshotItemRow.snapshot_sha256 == row.dataset_sha256,
        )
        .order_by(SnapshotItemRow.position)
        .limit(PREVIEW_ITEMS)
    ).all()
    job.chats.extend(item_proto(i, messages=False) for i in items)
    job.chat_count, job.message_count = snap.item_count, snap.message_count
    job.chats_truncated = snap.item_count > len(items)


def item_proto(item: SnapshotItemRow, *, messages: bool) -> job_pb2.DatasetItem:
    out = job_pb2.DatasetItem(
        id=item.item_id, name=item.name, message_count=item.message_count, split=item.split
    )
    if messages:
        out.messages.extend(
            job_pb2.Message(role=m["role"], content=m["content"]) for m in item.messages
        )
    return out
