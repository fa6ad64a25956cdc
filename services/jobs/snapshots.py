"""JobService's queries on a dataset's snapshots (`services.core.tables`' `snapshots` and
`snapshot_items`): one kept per org and content, its items listed, searched and read. Each
function runs in its caller's unit of work, as `services.jobs.store`'s do."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.object_tables import ObjectRow
from services.core.states import ObjectStatus
from services.core.tables import SnapshotItemRow, SnapshotRow
from trainyard.training import datasets


def snapshot(session: Session, org: str, sha256: str) -> SnapshotRow | None:
    return session.get(SnapshotRow, (org, sha256))


def stored_and_listed(session: Session, org: str, sha256: str) -> tuple[ObjectRow | None, bool]:
    """For a job on rows the org trained on before: its object holding the snapshot's
    bytes, locked as `lifecycle.stored_object` locks it (None unless stored), and whether
    the snapshot's rows are kept, in one statement rather than two reads. Without the
    object, the rows are not looked for (False: `add_snapshot` reads them then)."""
    listed = sa.exists().where(
        SnapshotRow.org == ObjectRow.org, SnapshotRow.sha256 == ObjectRow.sha256
    )
    found = session.execute(
        sa.select(ObjectRow, listed)
        .where(ObjectRow.org == org, ObjectRow.sha256 == sha256)
        .with_for_update(of=ObjectRow)
    ).one_or_none()
    if found is None:
        return None, False
    row, kept = found
    return (row if row.status == ObjectStatus.STORED else None), bool(kept)


def _like(search: str) -> str:
    """A case-folded substring pattern with LIKE's own characters escaped by `\\`."""
    escaped = search.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _item_filter(org: str, sha256: str, split: str, search: str) -> list[sa.ColumnElement[bool]]:
    where = [SnapshotItemRow.org == org, SnapshotItemRow.snapshot_sha256 == sha256]
    if split != "all":
        where.append(SnapshotItemRow.split == split)
    if search:
        where.append(SnapshotItemRow.search_text.like(_like(search), escape="\\"))
    return where


def snapshot_items(
    session: Session,
    org: str,
    sha256: str,
    *,
    split: str = "all",
    search: str = "",
    offset: int = 0,
    limit: int,
) -> Sequence[SnapshotItemRow]:
    """A snapshot's items in their order, `split` (all, train, eval) and matching `search`."""
    return session.scalars(
        sa.select(SnapshotItemRow)
        .where(*_item_filter(org, sha256, split, search))
        .order_by(SnapshotItemRow.position)
        .offset(offset)
        .limit(limit)
    ).all()


def count_snapshot_items(
    session: Session, org: str, sha256: str, *, split: str, search: str
) -> int:
    where = _item_filter(org, sha256, split, search)
    return (
        session.scalar(sa.select(sa.func.count()).select_from(SnapshotItemRow).where(*where)) or 0
    )


def snapshot_item(session: Session, org: str, sha256: str, item_id: str) -> SnapshotItemRow | None:
    return session.scalar(
        sa.select(SnapshotItemRow).where(
            SnapshotItemRow.org == org,
            SnapshotItemRow.snapshot_sha256 == sha256,
            SnapshotItemRow.item_id == item_id,
        )
    )


def add_snapshot(session: Session, org: str, made: datasets.Snapshot, now: dt.datetime) -> None:
    """Keep a snapshot's rows once per org: the same rows make the same snapshot."""
    if snapshot(session, org, made.sha256) is not None:
        return
    kept = SnapshotRow(
        org=org,
        sha256=made.sha256,
        item_count=len(made.items),
        message_count=made.message_count,
        size=len(made.data),
        create_time=now,
    )
    session.add(kept)
    session.flush([kept])  # before its items; alone, as a create's job is not flushed yet
    session.add_all(
        SnapshotItemRow(
            org=org,
            snapshot_sha256=made.sha256,
            position=position,
            item_id=item.id,
            name=item.name,
            split=split,
            message_count=len(item.messages),
            messages=[{"role": r, "content": c} for r, c in item.messages],
            search_text=" ".join([item.name, *(c for _, c in item.messages)]).lower(),
        )
        for position, (item, split) in enumerate(made.items)
    )
