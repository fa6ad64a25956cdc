"""The periodic scans of the meter process for the events no single change causes: a
running job that has reported nothing (no event: status, metric, log) for an endpoint's
`stalled_after_seconds`, and a checkpoint, LoRA, capability or merged output that expires
within its `expiring_within_seconds`. Each find is queued through the outbox under a key
that names it (the job and when it last reported; the object and its expiry), so a stall
or an expiry is announced once, however many scans or replicas see it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import webhooks
from services.core.object_tables import ObjectRow, fate, publishes
from services.core.states import JobStatus, ObjectStatus
from services.core.store import Store, utcnow
from services.core.tables import JobRow
from services.core.webhooks import EXPIRING, STALLED, WebhookRow

# The outputs an org may want to keep before they expire (never its datasets or snapshots).
EXPIRING_KINDS = ("checkpoint", "lora", "capability", "merged")
# The most finds one endpoint's scan queues at once; the next scan goes on.
MOST = 500


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Scans:
    def __init__(self, store: Store, clock: Callable[[], dt.datetime] = utcnow) -> None:
        self._store = store
        self._now = clock

    def run(self) -> str | None:
        """One scan of every listening endpoint, each in its own transaction; the line
        worth logging, if anything was queued."""
        with self._store.unit(write=False) as session:
            # Every org's endpoints: a sweep across orgs, as the retention sweep is.
            hooks = [
                (h.org, h.id)
                for h in session.scalars(sa.select(WebhookRow))
                if {STALLED, EXPIRING} & set(h.events)
            ]
        queued = 0
        for org, hook_id in hooks:
            with self._store.unit() as session:
                hook = session.get(WebhookRow, (org, hook_id))
                if hook is None:
                    continue
                now = self._now()
                if STALLED in hook.events:
                    queued += _stalled(session, hook, now)
                if EXPIRING in hook.events:
                    queued += _expiring(session, hook, now)
        return f"webhook scans queued {queued} deliveries" if queued else None


def _stalled(session: Session, hook: WebhookRow, now: dt.datetime) -> int:
    silent_since = now - dt.timedelta(seconds=hook.stalled_after_seconds)
    jobs = session.scalars(
        sa.select(JobRow)
        .where(
            JobRow.org == hook.org,
            JobRow.status == JobStatus.RUNNING,
            JobRow.update_time <= silent_since,
        )
        .order_by(JobRow.update_time)
        .limit(MOST)
    )
    found = 0
    for job in jobs:
        data = {
            "job_id": job.id,
            "number": job.number,
            "project": job.project,
            "status": job.status,
            "last_report_time": _stamp(job.update_time),
            "silent_seconds": int((now - job.update_time).total_seconds()),
            "stalled_after_seconds": hook.stalled_after_seconds,
        }
        key = f"{job.id}/{job.update_time.isoformat()}"
        found += webhooks.enqueue(session, hook, STALLED, data, key, now)
    return found


def _expiring(session: Session, hook: WebhookRow, now: dt.datetime) -> int:
    horizon = now + dt.timedelta(seconds=hook.expiring_within_seconds)
    rows = session.scalars(
        sa.select(ObjectRow)
        .where(
            ObjectRow.org == hook.org,
            ObjectRow.kind.in_(EXPIRING_KINDS),
            ObjectRow.status == ObjectStatus.STORED,
            ObjectRow.expires_at.is_not(None),
            ObjectRow.expires_at > now,
            ObjectRow.expires_at <= horizon,
            ObjectRow.pinned.is_(False),
            ~publishes(ObjectRow.org, ObjectRow.sha256),  # a publication keeps it
        )
        .order_by(ObjectRow.expires_at)
        .limit(MOST)
    )
    found = 0
    for row in rows:
        # Only what retention will take: not an object a live job or object still keeps.
        if not fate(session, row, now).expired(horizon):
            continue
        assert row.expires_at is not None
        data = {
            "sha256": row.sha256,
            "kind": row.kind,
            "name": row.name,
            "job_id": row.job_id,
            "size": row.size,
            "expire_time": _stamp(row.expires_at),
        }
        key = f"{row.sha256}/{row.expires_at.isoformat()}"
        found += webhooks.enqueue(session, hook, EXPIRING, data, key, now)
    return found
