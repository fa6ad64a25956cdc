"""MeterService's tables: rates, wallets and their caps, the double-entry ledger, and the
holds of running tasks. MeterService owns them; ClaimService and JobService write them
only through this package, inside the transaction of the claim, report or create that
moves the money (ARCHITECTURE.md §1)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core.store import Base, UtcDateTime


class RateRow(Base):
    """A rate the operator set; a meter without a row is priced at its compiled floor."""

    __tablename__ = "rates"

    meter: Mapped[str] = mapped_column(sa.String(96), primary_key=True)
    micro_cents: Mapped[int] = mapped_column(sa.BigInteger())
    update_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class WalletRow(Base):
    """An org's wallet, its payer. `balance` is the sum of the postings on its account,
    kept on the row so one payer's weighings serialise on one row lock."""

    __tablename__ = "wallets"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    balance: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    # The org's monthly cap in micro-cents; 0 is none.
    spend_cap: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    # The second through which its storage was charged.
    storage_through: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class SpendCapRow(Base):
    """A project's monthly cap."""

    __tablename__ = "spend_caps"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    project: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    micro_cents: Mapped[int] = mapped_column(sa.BigInteger())


class EntryRow(Base):
    """One transaction of the ledger, known by its name within the org: a name sent twice
    is applied once. `micro_cents` is what it moved on the org's wallet (credits positive,
    charges negative); its postings hold the whole transaction."""

    __tablename__ = "ledger_entries"
    __table_args__ = (
        sa.UniqueConstraint("org", "name", name="uq_ledger_entries_org_name"),
        sa.Index("ix_ledger_entries_org_id", "org", "id"),
        sa.Index("ix_ledger_entries_job_id", "job_id"),
    )

    id: Mapped[int] = mapped_column(
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    org: Mapped[str] = mapped_column(sa.String(63))
    name: Mapped[str] = mapped_column(sa.String(200))
    kind: Mapped[str] = mapped_column(sa.String(16))
    micro_cents: Mapped[int] = mapped_column(sa.BigInteger())
    job_id: Mapped[str] = mapped_column(sa.String(32), default="")
    task_id: Mapped[str] = mapped_column(sa.String(32), default="")
    project: Mapped[str] = mapped_column(sa.String(63), default="")
    span: Mapped[str] = mapped_column(sa.String(64), default="")
    quantity: Mapped[float] = mapped_column(sa.Float(), default=0.0)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class PostingRow(Base):
    """One leg of a transaction: an amount on an account. A transaction's legs sum to 0."""

    __tablename__ = "ledger_postings"

    entry_id: Mapped[int] = mapped_column(
        sa.ForeignKey("ledger_entries.id", ondelete="CASCADE"), primary_key=True
    )
    account: Mapped[str] = mapped_column(sa.String(96), primary_key=True)
    micro_cents: Mapped[int] = mapped_column(sa.BigInteger())


class HoldRow(Base):
    """The device-seconds held for one lease of a task, what the clock metered of them,
    and what that was charged, at the rate read when the task was claimed."""

    __tablename__ = "holds"
    __table_args__ = (
        sa.Index("ix_holds_org_status", "org", "status"),
        sa.Index("ix_holds_job_id", "job_id"),
    )

    task_id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    epoch: Mapped[int] = mapped_column(sa.BigInteger(), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    job_id: Mapped[str] = mapped_column(sa.String(32))
    project: Mapped[str] = mapped_column(sa.String(63), default="")
    # False on the org's own machines: metered, never charged.
    charged: Mapped[bool] = mapped_column(sa.Boolean())
    meter: Mapped[str] = mapped_column(sa.String(96), default="")
    rate: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    devices: Mapped[int] = mapped_column(sa.Integer())
    held_seconds: Mapped[int] = mapped_column(sa.BigInteger())
    used_seconds: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    charged_micro_cents: Mapped[int] = mapped_column(sa.BigInteger(), default=0)
    # `live`, then `released` (what it held beyond what it used goes back).
    status: Mapped[str] = mapped_column(sa.String(16), default="live")
    refusal: Mapped[str] = mapped_column(sa.String(32), default="")
    start_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    update_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


def holds_read(session: Session) -> dict[str, list[HoldRow]]:
    """Every hold of a job, by job, as a unit of work read or made them: a claim reads its
    job's holds once (`windows.bounds_left`), not again for the job's view."""
    return session.info.setdefault("holds", {})  # type: ignore[no-any-return]
