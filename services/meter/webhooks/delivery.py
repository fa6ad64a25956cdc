"""The delivery worker: a background task of the meter process that sends what the outbox
queued (`services.core.webhooks`), after the commit that queued it.

A round claims the deliveries due now, each by a conditional update of its lease (the
row is the truth, so several replicas on PostgreSQL never send one attempt twice at
once), sends them concurrently, and records each attempt: a 2xx answer succeeds it; any
other answer, a timeout, a refused connection or an address the guard refuses schedules
the next attempt by the retry schedule, until the window after the first attempt (24
hours) has passed and the delivery has `failed`. Redirects are never followed. The
receiver's body is never read, stored or logged; the log records a category."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import secrets
import ssl
from collections.abc import Callable, Sequence

import httpx
import sqlalchemy as sa
from standardwebhooks.webhooks import Webhook

from services.core.config import Config
from services.core.store import Store, utcnow
from services.core.webhooks import FAILED, PENDING, SUCCEEDED, DeliveryRow, WebhookRow, topic
from services.meter.webhooks.guard import Guard, Refused, Target
from services.meter.webhooks.sealing import Sealer

log = logging.getLogger(__name__)

# Deliveries one round claims and sends at once.
BATCH = 16
USER_AGENT = "Trainyard-Webhooks/1"


def next_attempt(
    schedule: Sequence[float],
    window: float,
    first: dt.datetime,
    attempts: int,
    now: dt.datetime,
) -> dt.datetime | None:
    """When the attempt after `attempts` failed ones is due (the last made `now`), or None
    once the window after the `first` attempt is spent. Gaps follow `schedule` (index
    `attempts`, its last gap repeated); one that would pass the window's end is cut to it,
    so a last attempt is made at the end of the window."""
    gap = schedule[min(attempts, len(schedule) - 1)]
    deadline = first + dt.timedelta(seconds=window)
    due = now + dt.timedelta(seconds=gap)
    if due <= deadline:
        return due
    return deadline if now < deadline else None


@dataclasses.dataclass(frozen=True)
class Claimed:
    """A delivery claimed for one attempt, with what sending it needs."""

    id: str
    org: str
    webhook_id: str
    message_id: str
    payload: str
    url: str
    sealed: bytes
    attempts: int
    first_attempt_time: dt.datetime | None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one attempt met: the HTTP status (0 without an answer) and the error category
    ("" for a success)."""

    status_code: int
    error: str

    @property
    def succeeded(self) -> bool:
        return not self.error


class Deliverer:
    """Claims, sends and records deliveries; `run` is the process's background loop."""

    def __init__(
        self,
        store: Store,
        config: Config,
        sealer: Sealer,
        guard: Guard,
        *,
        clock: Callable[[], dt.datetime] = utcnow,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._store = store
        self._sealer = sealer
        self._guard = guard
        self._now = clock
        self._schedule = tuple(config.webhook_retry_schedule)
        self._window = config.webhook_retry_window_seconds
        self._timeout = config.webhook_timeout_seconds
        self._poll = config.webhook_poll_seconds
        self._transport = transport
        # A claim outlives one attempt's limit, so only a worker that died loses it.
        self._lease = dt.timedelta(seconds=2 * self._timeout + 30)
        self._owner = secrets.token_hex(8)

    def client(self) -> httpx.AsyncClient:
        # No proxy from the environment (it would connect where the guard did not look),
        # and no redirect followed.
        return httpx.AsyncClient(
            timeout=self._timeout,
            follow_redirects=False,
            trust_env=False,
            transport=self._transport,
        )

    async def run(self, stopping: asyncio.Event) -> None:
        async with self.client() as client:
            with self._store.wakeups.watching(topic()) as queued:
                while not stopping.is_set():
                    queued.clear()
                    try:
                        sent, wait = await self.round(client)
                    except Exception:
                        log.exception("webhook delivery round failed")
                        sent, wait = 0, self._poll
                    if sent >= BATCH:
                        continue  # more may be due already
                    await _either(queued, stopping, min(wait, self._poll))

    async def round(self, client: httpx.AsyncClient) -> tuple[int, float]:
        """Send what is due; the attempts made, and the seconds until the next is due."""
        claimed = await asyncio.to_thread(self.claim)
        if claimed:
            outcomes = await asyncio.gather(*(self.attempt(client, c) for c in claimed))
            await asyncio.to_thread(self.record, list(zip(claimed, outcomes, strict=True)))
        return len(claimed), await asyncio.to_thread(self.until_due)

    # -- the database's side ---------------------------------------------------------------

    def claim(self) -> list[Claimed]:
        """Lease up to BATCH due deliveries to this worker."""
        now = self._now()
        free = sa.or_(DeliveryRow.lease_until.is_(None), DeliveryRow.lease_until < now)
        due = sa.and_(DeliveryRow.status == PENDING, DeliveryRow.next_attempt_time <= now, free)
        found: list[Claimed] = []
        with self._store.unit() as session:
            ids = session.scalars(
                sa.select(DeliveryRow.id)
                .where(due)
                .order_by(DeliveryRow.next_attempt_time)
                .limit(BATCH)
            ).all()
            for delivery_id in ids:
                taken = session.execute(
                    sa.update(DeliveryRow)
                    .where(DeliveryRow.id == delivery_id, due)
                    .values(lease_until=now + self._lease, lease_owner=self._owner)
                    .returning(DeliveryRow.id)
                    .execution_options(synchronize_session=False)
                ).scalar()
                if taken is None:
                    continue  # another replica's
                row = session.get(DeliveryRow, delivery_id, populate_existing=True)
                assert row is not None
                hook = session.get(WebhookRow, (row.org, row.webhook_id))
                if hook is None:  # its endpoint was deleted as it was queued
                    session.delete(row)
                    continue
                found.append(
                    Claimed(
                        row.id,
                        row.org,
                        row.webhook_id,
                        row.message_id,
                        row.payload,
                        hook.url,
                        hook.sealed,
                        row.attempts,
                        row.first_attempt_time,
                    )
                )
        return found

    def record(self, results: list[tuple[Claimed, Outcome]]) -> None:
        """Write each attempt's outcome under this worker's lease."""
        now = self._now()
        with self._store.unit() as session:
            for claimed, outcome in results:
                first = claimed.first_attempt_time or now
                attempts = claimed.attempts + 1
                values: dict[str, object] = {
                    "attempts": attempts,
                    "last_status_code": outcome.status_code,
                    "last_error": outcome.error,
                    "last_attempt_time": now,
                    "first_attempt_time": first,
                    "lease_until": None,
                    "lease_owner": "",
                    "update_time": now,
                }
                if outcome.succeeded:
                    values.update(status=SUCCEEDED, next_attempt_time=None)
                else:
                    due = next_attempt(self._schedule, self._window, first, attempts, now)
                    values.update(status=PENDING if due else FAILED, next_attempt_time=due)
                session.execute(
                    sa.update(DeliveryRow)
                    .where(DeliveryRow.id == claimed.id, DeliveryRow.lease_owner == self._owner)
                    .values(**values)
                    .execution_options(synchronize_session=False)
                )

    def until_due(self) -> float:
        """Seconds until the soonest pending delivery no worker holds is due (the poll
        when none is: one another replica is sending is its to record)."""
        now = self._now()
        with self._store.unit(write=False) as session:
            soonest = session.scalar(
                sa.select(sa.func.min(DeliveryRow.next_attempt_time)).where(
                    DeliveryRow.status == PENDING,
                    sa.or_(DeliveryRow.lease_until.is_(None), DeliveryRow.lease_until < now),
                )
            )
        if soonest is None:
            return self._poll
        if soonest.tzinfo is None:  # SQLite's aggregate skips the column's type
            soonest = soonest.replace(tzinfo=dt.UTC)
        return max((soonest - now).total_seconds(), 0.0)

    # -- the receiver's side ---------------------------------------------------------------

    async def attempt(self, client: httpx.AsyncClient, claimed: Claimed) -> Outcome:
        try:
            target = await asyncio.to_thread(self._guard.target, claimed.url)
        except Refused as refused:
            return Outcome(0, refused.category)
        try:
            secret = self._sealer.open(claimed.org, claimed.webhook_id, claimed.sealed)
            return await send(
                client, target, secret, claimed.message_id, claimed.payload, self._now()
            )
        except Exception:  # recorded as a failed attempt; the round's others stand
            log.exception("webhook delivery %s failed unexpectedly", claimed.id)
            return Outcome(0, "connection_failed")


def headers(secret: str, message_id: str, payload: str, now: dt.datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: its id, its time, its signature."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, now, payload),
    }


async def send(
    client: httpx.AsyncClient,
    target: Target,
    secret: str,
    message_id: str,
    payload: str,
    now: dt.datetime,
) -> Outcome:
    """POST one attempt to the checked address, naming the URL's host in `Host` and, for
    https, in TLS (SNI and the certificate's check); the answer's body is not read."""
    request = client.build_request(
        "POST",
        target.connect_url,
        content=payload.encode(),
        headers={
            "host": target.host_header,
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            **headers(secret, message_id, payload, now),
        },
        extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
    )
    try:
        response = await client.send(request, stream=True)
    except httpx.TimeoutException:
        return Outcome(0, "timeout")
    except httpx.HTTPError as exc:
        return Outcome(0, "tls_failed" if _tls(exc) else "connection_failed")
    with contextlib.suppress(httpx.HTTPError):
        await response.aclose()
    code = response.status_code
    return Outcome(code, "" if 200 <= code < 300 else "http_status")


def _tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _either(one: asyncio.Event, other: asyncio.Event, timeout: float) -> None:
    """Wait until either event is set, or `timeout` seconds."""
    waits = [asyncio.ensure_future(e.wait()) for e in (one, other)]
    try:
        await asyncio.wait(waits, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
