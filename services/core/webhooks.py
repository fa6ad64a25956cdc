"""Webhooks' tables and their outbox: the deliveries a change queues in its own
transaction (a job's end, a charge crossing a threshold, a scan's find), one per endpoint
of the org subscribed to the event, sent after the commit by the meter process's worker
(`services.meter.webhooks`). A crash between the change and the send loses nothing: the
delivery is a row of the same commit. MeterService owns both tables; the lifecycle module
and the money module write deliveries inside the transactions that cause them, as
ARCHITECTURE.md §1 lets a change that spans owners.

Each queued delivery carries a `dedupe` key, unique per endpoint, so an event found
twice (a replayed move, two replicas scanning at once, a threshold crossed again by a
later charge) is queued once; a conflicting insert is skipped, never an error that would
roll the caller's change back."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import ids
from services.core.money import ledger
from services.core.money.tables import WalletRow
from services.core.store import Base, UtcDateTime, utcnow
from services.core.wakeups import mark

# The event types an endpoint may subscribe to.
JOB_ENDS = ("job.succeeded", "job.failed", "job.cancelled", "job.stopped", "job.rejected")
STALLED, BUDGET, SPEND_CAP, EXPIRING = (
    "job.stalled",
    "budget.threshold",
    "spend_cap.threshold",
    "artifact.expiring",
)
EVENT_TYPES = (*JOB_ENDS, STALLED, BUDGET, SPEND_CAP, EXPIRING)
# A delivery's states.
PENDING, SUCCEEDED, FAILED = "pending", "succeeded", "failed"


def topic() -> str:
    """A delivery was queued: the meter process's worker wakes to send it."""
    return "webhooks"


class WebhookRow(Base):
    """An endpoint of an org: where to POST which events, and its signing secret sealed
    under the master key (`services.meter.webhooks.service.Sealer`)."""

    __tablename__ = "webhooks"
    __table_args__ = (sa.Index("ix_webhooks_org_create_time", "org", "create_time"),)

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    url: Mapped[str] = mapped_column(sa.String(2048))
    description: Mapped[str] = mapped_column(sa.String(256), default="")
    events: Mapped[list[str]] = mapped_column(sa.JSON())
    stalled_after_seconds: Mapped[int] = mapped_column(sa.Integer())
    expiring_within_seconds: Mapped[int] = mapped_column(sa.Integer())
    thresholds_percent: Mapped[list[int]] = mapped_column(sa.JSON())
    sealed: Mapped[bytes] = mapped_column(sa.LargeBinary())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class DeliveryRow(Base):
    """One message to one endpoint, and what became of sending it. The worker claims a
    due one by moving its `lease_until` (a conditional update), so two replicas never send
    the same attempt at once."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("webhook_id", "dedupe", name="uq_webhook_deliveries_webhook_id"),
        sa.Index("ix_webhook_deliveries_org_webhook", "org", "webhook_id", "create_time"),
        sa.Index("ix_webhook_deliveries_status_due", "status", "next_attempt_time"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    webhook_id: Mapped[str] = mapped_column(sa.String(32))
    message_id: Mapped[str] = mapped_column(sa.String(32))
    event_type: Mapped[str] = mapped_column(sa.String(32))
    # The exact body sent, so every attempt and redelivery signs the same bytes.
    payload: Mapped[str] = mapped_column(sa.Text())
    # What makes a repeat of the event the same delivery; None for a redelivery.
    dedupe: Mapped[str | None] = mapped_column(sa.String(200), nullable=True)
    status: Mapped[str] = mapped_column(sa.String(16))
    attempts: Mapped[int] = mapped_column(sa.Integer(), default=0)
    last_status_code: Mapped[int] = mapped_column(sa.Integer(), default=0)
    last_error: Mapped[str] = mapped_column(sa.String(32), default="")
    next_attempt_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # The retry window (24 hours by default) runs from the first attempt.
    first_attempt_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    last_attempt_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    lease_owner: Mapped[str] = mapped_column(sa.String(32), default="")
    redelivery_of: Mapped[str] = mapped_column(sa.String(32), default="")
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    update_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


def payload(event_type: str, data: Mapping[str, Any], now: dt.datetime) -> str:
    """The body Standard Webhooks gives a message: its type, when it happened, its data."""
    stamp = now.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps(
        {"type": event_type, "timestamp": stamp, "data": dict(data)}, separators=(",", ":")
    )


def subscribed(session: Session, org: str, *event_types: str) -> list[WebhookRow]:
    """The org's endpoints subscribed to any of `event_types`."""
    rows = session.scalars(sa.select(WebhookRow).where(WebhookRow.org == org))
    return [row for row in rows if set(row.events) & set(event_types)]


def enqueue(
    session: Session,
    hook: WebhookRow,
    event_type: str,
    data: Mapping[str, Any],
    dedupe: str,
    now: dt.datetime | None = None,
) -> bool:
    """Queue one delivery to `hook` in the caller's transaction, unless one with the same
    `dedupe` is queued already (False); the worker wakes once the transaction commits."""
    now = now or utcnow()
    dialect = session.get_bind().dialect.name
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(DeliveryRow)
    done = session.execute(
        insert.values(
            id=ids.new_id("whd"),
            org=hook.org,
            webhook_id=hook.id,
            # One event to several endpoints is one message, as the specification has it.
            message_id=ids.derived_id("msg", hook.org, event_type, dedupe),
            event_type=event_type,
            payload=payload(event_type, data, now),
            dedupe=dedupe,
            status=PENDING,
            attempts=0,
            last_status_code=0,
            last_error="",
            next_attempt_time=now,
            lease_owner="",
            redelivery_of="",
            create_time=now,
            update_time=now,
        )
        .on_conflict_do_nothing()
        .returning(DeliveryRow.id)
    )
    if done.scalar() is None:  # queued already
        return False
    mark(session, topic())
    return True


def emit(
    session: Session,
    org: str,
    event_type: str,
    data: Mapping[str, Any],
    dedupe: str,
    now: dt.datetime | None = None,
) -> None:
    """Queue an event to every endpoint of the org subscribed to it."""
    for hook in subscribed(session, org, event_type):
        enqueue(session, hook, event_type, data, dedupe, now)


# -- the events the lifecycle and the money modules raise ------------------------------------


def job_ended(session: Session, job: Any) -> None:
    """A job reached a terminal state (`lifecycle.moves.move_job`): `job.<status>`, with
    what it was charged over all its attempts."""
    event_type = f"job.{job.status}"
    if event_type not in JOB_ENDS or not (hooks := subscribed(session, job.org, event_type)):
        return
    cost = ledger.job_cost(session, job.id)
    data = {
        "job_id": job.id,
        "number": job.number,
        "project": job.project,
        "status": job.status,
        "attempt_number": job.attempt_count,
        "failure_code": job.failure_code,
        "failure_category": job.failure_category,
        "failure_message": job.failure_message,
        "cost_micro_cents": cost,
        "cost_credits": cost / 1_000_000,
    }
    for hook in hooks:
        enqueue(session, hook, event_type, data, f"{job.id}/{job.attempt_count}/{job.status}")


def crossed(before: int, after: int, limit: int, percents: Iterable[int]) -> list[int]:
    """The percents of `limit` that spend moving from `before` to `after` passed (reached
    or went beyond), lowest first."""
    if limit <= 0 or after <= before:
        return []
    return sorted(p for p in set(percents) if before * 100 < limit * p <= after * 100)


def charged(
    session: Session,
    *,
    org: str,
    project: str,
    job_id: str,
    amount: int,
    budget: int | None,
    now: dt.datetime,
) -> None:
    """A charge of `amount` micro-cents was posted to the org's wallet (`money.windows`),
    for `job_id` when a job's, whose `budget` (micro-cents) is given when it has one. Each
    endpoint hears each of its thresholds the charge crossed: of the job's budget, of the
    org's monthly spend cap and of the project's, once each. The totals are read only for
    an org with an endpoint that listens."""
    if amount <= 0 or not (hooks := subscribed(session, org, BUDGET, SPEND_CAP)):
        return
    job_spent = ledger.job_cost(session, job_id) if budget and job_id else 0
    wallet = session.get(WalletRow, org)
    caps = [
        ("org", "", wallet.spend_cap if wallet is not None else 0),
        ("project", project, ledger.project_cap(session, org, project) if project else 0),
    ]
    spent = {
        scope: ledger.spent(session, org, now, project=name or None)
        for scope, name, cap in caps
        if cap
    }
    month = f"{now:%Y-%m}"
    for hook in hooks:
        if BUDGET in hook.events and budget and job_id:
            for percent in crossed(job_spent - amount, job_spent, budget, hook.thresholds_percent):
                data = {
                    "job_id": job_id,
                    "project": project,
                    "threshold_percent": percent,
                    "budget_micro_cents": budget,
                    "spent_micro_cents": job_spent,
                }
                enqueue(session, hook, BUDGET, data, f"{job_id}/{budget}/{percent}", now)
        if SPEND_CAP not in hook.events:
            continue
        for scope, name, cap in caps:
            if scope not in spent:
                continue
            total = spent[scope]
            for percent in crossed(total - amount, total, cap, hook.thresholds_percent):
                data = {
                    "scope": scope,
                    "project": name,
                    "month": month,
                    "threshold_percent": percent,
                    "cap_micro_cents": cap,
                    "spent_micro_cents": total,
                }
                key = f"{scope}/{name}/{month}/{cap}/{percent}"
                enqueue(session, hook, SPEND_CAP, data, key, now)
