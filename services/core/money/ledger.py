"""Wallets and the double-entry ledger. Each transaction is an entry known by its name
within the org (one sent twice is applied once) with two postings that sum to zero: the
org's wallet account and its counterpart (the funding an operator credits from, or the
platform's revenue for compute, storage and clients). A wallet's `balance` is the sum of
the postings on its account, moved in the same transaction as they are written."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from services.core.auth import ApiKey
from services.core.money.rates import MICRO_CENTS_PER_CENT
from services.core.money.tables import EntryRow, PostingRow, SpendCapRow, WalletRow
from services.core.tables import JobRow

FUNDING = "funding"
REVENUE = {"compute": "revenue:compute", "storage": "revenue:storage", "client": "revenue:clients"}
FREE_CREDIT = "credit/free"


def account(org: str) -> str:
    return f"wallet:{org}"


def wallet(session: Session, org: str, *, free_cents: int, now: dt.datetime) -> WalletRow:
    """The org's wallet, its row locked: every weighing and posting of one payer holds
    this lock, so none weighs a balance another is changing. Made on first use with the
    configured free credit."""
    row = session.scalar(
        sa.select(WalletRow)
        .where(WalletRow.org == org)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is not None:
        return row
    dialect = session.get_bind().dialect.name
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(WalletRow)
    session.execute(
        insert.values(org=org, balance=0, spend_cap=0, create_time=now).on_conflict_do_nothing()
    )
    row = session.scalar(
        sa.select(WalletRow)
        .where(WalletRow.org == org)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    assert row is not None
    if free_cents > 0:
        post(session, row, FREE_CREDIT, "credit", free_cents * MICRO_CENTS_PER_CENT, now=now)
    return row


def post(
    session: Session,
    wallet: WalletRow,
    name: str,
    kind: str,
    micro_cents: int,
    *,
    now: dt.datetime,
    job_id: str = "",
    task_id: str = "",
    project: str = "",
    span: str = "",
    quantity: float = 0.0,
) -> bool:
    """Apply one transaction to the wallet (credits positive, charges negative) under its
    name; False when that name was applied already. The caller holds the wallet's lock."""
    exists = session.scalar(
        sa.select(EntryRow.id).where(EntryRow.org == wallet.org, EntryRow.name == name)
    )
    if exists is not None:
        return False
    entry = EntryRow(
        org=wallet.org,
        name=name,
        kind=kind,
        micro_cents=micro_cents,
        job_id=job_id,
        task_id=task_id,
        project=project,
        span=span,
        quantity=quantity,
        create_time=now,
    )
    session.add(entry)
    session.flush()
    counter = FUNDING if kind == "credit" else REVENUE[kind]
    session.add_all(
        [
            PostingRow(entry_id=entry.id, account=account(wallet.org), micro_cents=micro_cents),
            PostingRow(entry_id=entry.id, account=counter, micro_cents=-micro_cents),
        ]
    )
    wallet.balance += micro_cents
    return True


def month_start(now: dt.datetime) -> dt.datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def spent(session: Session, org: str, now: dt.datetime, *, project: str | None = None) -> int:
    """What the org (or one project of it) was charged this calendar month (UTC)."""
    query = sa.select(sa.func.coalesce(sa.func.sum(EntryRow.micro_cents), 0)).where(
        EntryRow.org == org, EntryRow.kind != "credit", EntryRow.create_time >= month_start(now)
    )
    if project is not None:
        query = query.where(EntryRow.project == project)
    return -int(session.scalar(query) or 0)


def key_spent(session: Session, org: str, key_id: str, now: dt.datetime) -> int:
    """What the jobs an API key created were charged this calendar month (UTC)."""
    jobs = sa.select(JobRow.id).where(JobRow.org == org, JobRow.key_id == key_id)
    total = session.scalar(
        sa.select(sa.func.coalesce(sa.func.sum(EntryRow.micro_cents), 0)).where(
            EntryRow.org == org,
            EntryRow.kind == "compute",
            EntryRow.create_time >= month_start(now),
            EntryRow.job_id.in_(jobs),
        )
    )
    return -int(total or 0)


def key_cap(session: Session, key_id: str) -> int | None:
    """An API key's monthly cap in micro-cents; None when it has none."""
    cents = session.scalar(sa.select(ApiKey.monthly_spend_cap).where(ApiKey.id == key_id))
    return None if cents is None else int(cents) * MICRO_CENTS_PER_CENT


def key_jobs(session: Session, key_id: str, job_ids: set[str]) -> set[str]:
    """Which of `job_ids` the key created."""
    if not job_ids or not key_id:
        return set()
    return set(
        session.scalars(sa.select(JobRow.id).where(JobRow.id.in_(job_ids), JobRow.key_id == key_id))
    )


def project_cap(session: Session, org: str, project: str) -> int:
    cap = session.scalar(
        sa.select(SpendCapRow.micro_cents).where(
            SpendCapRow.org == org, SpendCapRow.project == project
        )
    )
    return int(cap or 0)


def job_cost(session: Session, job_id: str) -> int:
    """What a job was charged so far (positive)."""
    total = session.scalar(
        sa.select(sa.func.coalesce(sa.func.sum(EntryRow.micro_cents), 0)).where(
            EntryRow.job_id == job_id, EntryRow.kind == "compute"
        )
    )
    return -int(total or 0)
