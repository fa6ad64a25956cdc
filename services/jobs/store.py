"""Tables JobService owns beside the lifecycle's: idempotency keys and dataset snapshots."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from services.core.store import Base, UtcDateTime


class IdempotencyKey(Base):
    """A key used on a method in an org, with the shape it was first used with."""

    __tablename__ = "idempotency_keys"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    method: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    request_sha256: Mapped[str] = mapped_column(sa.String(64))
    resource_id: Mapped[str] = mapped_column(sa.String(32))
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


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
