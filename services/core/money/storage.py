"""Storage by the GB-month (HIP-1333 §10): each payer carries the second through which
its storage was charged, and each sweep charges the span since at the bytes the org keeps
now, the span's debit named by the span so it is charged once; the watermark moves in
the same transaction as the debit. Bytes granted and not confirmed are not charged. A
new upload or output is granted only when the payer holds a month of what the org keeps,
has pending, and declares."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import webhooks
from services.core.money import ledger, rates, windows
from services.core.money.tables import WalletRow
from services.core.object_tables import ObjectRow
from services.core.states import ObjectStatus

GB = 10**9
# A storage month: 30 days, as the GB-month is priced.
MONTH_SECONDS = 30 * 86_400


def held_bytes(session: Session, org: str, status: str, *, besides: str = "") -> int:
    """The bytes of the org's objects in `status`, but for the object `besides`."""
    total = session.scalar(
        sa.select(sa.func.coalesce(sa.func.sum(ObjectRow.size), 0)).where(
            ObjectRow.org == org, ObjectRow.status == status, ObjectRow.sha256 != besides
        )
    )
    return int(total or 0)


def span_price(size: int, per_gb_month: int, seconds: int) -> int:
    """The price of keeping `size` bytes for `seconds`, floored to the micro-cent."""
    return size * per_gb_month * seconds // (GB * MONTH_SECONDS)


def month_cents(size: int, per_gb_month: int) -> float:
    """What keeping `size` bytes costs a month at a rate in micro-cents a GB-month, in US
    cents, unrounded: a small object's cost is a fraction of a micro-cent."""
    return size * per_gb_month / GB / rates.MICRO_CENTS_PER_CENT


def storage_rate(session: Session) -> int:
    """The deployment's storage rate, in micro-cents a GB-month."""
    return rates.rate(session, rates.STORAGE)[0]


def accrue(session: Session, policy: windows.Policy, org: str, now: dt.datetime) -> int:
    """Charge the org's storage from its watermark to `now`; what was charged. A payer's
    first sweep only sets its watermark: objects are charged from the first sweep after
    they are stored."""
    wallet = ledger.wallet(session, org, free_cents=policy.free_cents, now=now)
    since, through = wallet.storage_through, now.replace(microsecond=0)
    if since is not None and through <= since:
        return 0
    wallet.storage_through = through
    if since is None:
        return 0
    seconds = int((through - since).total_seconds())
    size = held_bytes(session, org, ObjectStatus.STORED)
    amount = span_price(size, rates.rate(session, rates.STORAGE)[0], seconds)
    if amount > 0:
        span = f"{int(since.timestamp())}/{int(through.timestamp())}"
        if ledger.post(
            session,
            wallet,
            f"storage/{span}",
            "storage",
            -amount,
            now=now,
            span=span,
            quantity=float(size) * seconds,
        ):
            webhooks.charged(
                session, org=wallet.org, project="", job_id="", amount=amount, budget=None, now=now
            )
    return amount


def payers(session: Session) -> list[str]:
    """Every org that has a wallet or keeps an object."""
    found = set(session.scalars(sa.select(WalletRow.org)))
    found.update(session.scalars(sa.select(ObjectRow.org).distinct()))
    return sorted(found)


def admit(
    session: Session,
    policy: windows.Policy,
    org: str,
    declared: int,
    *,
    besides: str,
    now: dt.datetime,
) -> None:
    """Refuse a grant whose payer cannot hold a month of what the org keeps, has pending
    (but for the object `besides`, being granted again) and declares."""
    size = held_bytes(session, org, ObjectStatus.STORED) + held_bytes(
        session, org, ObjectStatus.PENDING, besides=besides
    )
    month = span_price(size + declared, rates.rate(session, rates.STORAGE)[0], MONTH_SECONDS)
    wallet = ledger.wallet(session, org, free_cents=policy.free_cents, now=now)
    refusal = windows.weigh(session, wallet, month, project="", now=now)
    windows.refuse(refusal, "a month of the org's storage with these bytes")
