"""WebhookService's use cases: register, list, read and delete an org's endpoints, page
their delivery logs and redeliver a message. The deliveries themselves are queued by the
outbox (`services.core.webhooks`) and sent by the worker (`delivery`)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from google.protobuf import json_format, struct_pb2, timestamp_pb2

from services.core import audit, errors, ids, webhooks
from services.core.auth import Principal
from services.core.pagetoken import PageTokens, page_size
from services.core.store import Store, utcnow
from services.core.wakeups import mark
from services.core.webhooks import EVENT_TYPES, PENDING, DeliveryRow, WebhookRow
from services.meter.webhooks.guard import Guard
from services.meter.webhooks.sealing import Sealer, new_secret
from trainyard.webhook.v1 import webhook_pb2, webhook_service_pb2

# The endpoints one org may hold: each event fans out to every one of them.
MAX_WEBHOOKS = 20
MAX_DESCRIPTION = 256
STALLED_AFTER = (1, 604_800, 900)  # the least, the most, and the default when 0
EXPIRING_WITHIN = (1, 7_776_000, 86_400)
DEFAULT_THRESHOLDS = (50, 80, 100)
MAX_THRESHOLDS = 10
DESCRIPTION = re.compile(r"^[^\x00-\x1f\x7f]*$")
HOOK_ID = re.compile(r"^wh_[0-9a-f]{16}$")


def _check(request: webhook_service_pb2.CreateWebhookRequest, guard: Guard) -> None:
    """Every field within its bounds, in the request's order; a URL the deployment does
    not allow is refused naming `url` only."""
    guard.check_at_create(request.url)
    events = list(request.events)
    if not events:
        raise errors.ValidationError("events", "is required")
    if any(e not in EVENT_TYPES for e in events):
        raise errors.ValidationError(
            "events",
            "holds an event type this deployment does not send",
            metadata={"supported": ",".join(EVENT_TYPES)},
        )
    if len(set(events)) != len(events):
        raise errors.ValidationError("events", "must not repeat an event type")
    if len(request.description) > MAX_DESCRIPTION or not DESCRIPTION.fullmatch(request.description):
        raise errors.ValidationError(
            "description", "must be at most 256 characters without control characters"
        )
    for field, (least, most, _) in (
        ("stalled_after_seconds", STALLED_AFTER),
        ("expiring_within_seconds", EXPIRING_WITHIN),
    ):
        value = getattr(request, field)
        if value and not least <= value <= most:
            raise errors.ValidationError(field, f"must be between {least} and {most} seconds")
    thresholds = list(request.thresholds_percent)
    if (
        len(thresholds) > MAX_THRESHOLDS
        or len(set(thresholds)) != len(thresholds)
        or any(not 1 <= p <= 100 for p in thresholds)
    ):
        raise errors.ValidationError(
            "thresholds_percent", "must be at most 10 distinct whole percents from 1 to 100"
        )


def _ts(when: dt.datetime | None) -> timestamp_pb2.Timestamp | None:
    if when is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(when)
    return stamp


def to_proto(row: WebhookRow) -> webhook_pb2.Webhook:
    return webhook_pb2.Webhook(
        id=row.id,
        url=row.url,
        events=row.events,
        description=row.description,
        stalled_after_seconds=row.stalled_after_seconds,
        expiring_within_seconds=row.expiring_within_seconds,
        thresholds_percent=row.thresholds_percent,
        create_time=_ts(row.create_time),
    )


def delivery_proto(row: DeliveryRow) -> webhook_pb2.Delivery:
    body = struct_pb2.Struct()
    json_format.ParseDict(json.loads(row.payload), body)
    return webhook_pb2.Delivery(
        id=row.id,
        webhook_id=row.webhook_id,
        message_id=row.message_id,
        event_type=row.event_type,
        status=row.status,
        attempts=row.attempts,
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        next_attempt_time=_ts(row.next_attempt_time),
        create_time=_ts(row.create_time),
        payload=body,
        last_attempt_time=_ts(row.last_attempt_time),
        redelivery_of=row.redelivery_of,
    )


def _newest_first(
    query: sa.Select[Any], column: Any, key: Any, position: dict[str, Any] | None
) -> sa.Select[Any]:
    """Newest first by (create_time, id), after a page's last row when given."""
    if position:
        when = dt.datetime.fromisoformat(str(position["t"]))
        query = query.where(
            sa.or_(column < when, sa.and_(column == when, key < str(position["id"])))
        )
    return query.order_by(column.desc(), key.desc())


class WebhookService:
    def __init__(
        self,
        store: Store,
        sealer: Sealer,
        guard: Guard,
        tokens: PageTokens,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._store = store
        self._sealer = sealer
        self._guard = guard
        self._tokens = tokens
        self._now = clock

    def create(
        self,
        principal: Principal,
        request: webhook_service_pb2.CreateWebhookRequest,
        request_id: str = "",
    ) -> webhook_pb2.Webhook:
        _check(request, self._guard)
        org, hook_id, secret = principal.org, ids.new_id("wh"), new_secret()
        with self._store.unit() as session:
            held = session.scalar(
                sa.select(sa.func.count()).select_from(WebhookRow).where(WebhookRow.org == org)
            )
            if int(held or 0) >= MAX_WEBHOOKS:
                raise errors.ResourceExhausted(
                    "The org holds its most webhook endpoints; delete one first.",
                    reason="WEBHOOK_LIMIT",
                    metadata={"limit": str(MAX_WEBHOOKS)},
                )
            row = WebhookRow(
                org=org,
                id=hook_id,
                url=request.url,
                description=request.description,
                events=list(request.events),
                stalled_after_seconds=request.stalled_after_seconds or STALLED_AFTER[2],
                expiring_within_seconds=request.expiring_within_seconds or EXPIRING_WITHIN[2],
                thresholds_percent=sorted(request.thresholds_percent or DEFAULT_THRESHOLDS),
                sealed=self._sealer.seal(org, hook_id, secret),
                create_time=self._now(),
            )
            session.add(row)
            audit.record(
                session,
                "training.webhook.created",
                org=org,
                subject=hook_id,
                actor=principal.key_id,
                request_id=request_id,
            )
            session.flush()
            made = to_proto(row)
        made.secret = secret  # this answer only
        return made

    def webhooks(
        self, principal: Principal, *, size: int, token: str
    ) -> tuple[list[webhook_pb2.Webhook], str]:
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListWebhooks"}
        position = self._tokens.decode(token, scope)
        query = _newest_first(
            sa.select(WebhookRow).where(WebhookRow.org == principal.org),
            WebhookRow.create_time,
            WebhookRow.id,
            position,
        )
        with self._store.unit(write=False) as session:
            rows = list(session.scalars(query.limit(limit + 1)))
            more, rows = len(rows) > limit, rows[:limit]
            following = self._token(rows[-1].create_time, rows[-1].id, scope) if more else ""
            return [to_proto(r) for r in rows], following

    def _token(self, when: dt.datetime, key: str, scope: dict[str, str]) -> str:
        return self._tokens.encode({"t": when.isoformat(), "id": key}, scope)

    def _hook(self, session: sa.orm.Session, org: str, hook_id: str) -> WebhookRow:
        """The org's endpoint; an id of another org's, or none, answers as unknown."""
        row = session.get(WebhookRow, (org, hook_id)) if HOOK_ID.fullmatch(hook_id) else None
        if row is None:
            raise errors.NotFound()
        return row

    def get(self, principal: Principal, hook_id: str) -> webhook_pb2.Webhook:
        with self._store.unit(write=False) as session:
            return to_proto(self._hook(session, principal.org, hook_id))

    def delete(self, principal: Principal, hook_id: str, request_id: str = "") -> bool:
        with self._store.unit() as session:
            row = session.get(WebhookRow, (principal.org, hook_id))
            if row is not None:
                session.execute(
                    sa.delete(DeliveryRow).where(
                        DeliveryRow.org == principal.org, DeliveryRow.webhook_id == hook_id
                    )
                )
                session.delete(row)
                audit.record(
                    session,
                    "training.webhook.deleted",
                    org=principal.org,
                    subject=hook_id,
                    actor=principal.key_id,
                    request_id=request_id,
                )
        return True

    def deliveries(
        self, principal: Principal, hook_id: str, *, size: int, token: str
    ) -> tuple[list[webhook_pb2.Delivery], str]:
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListWebhookDeliveries", "webhook": hook_id}
        with self._store.unit(write=False) as session:
            self._hook(session, principal.org, hook_id)  # before the token: who may see it
            position = self._tokens.decode(token, scope)
            query = _newest_first(
                sa.select(DeliveryRow).where(
                    DeliveryRow.org == principal.org, DeliveryRow.webhook_id == hook_id
                ),
                DeliveryRow.create_time,
                DeliveryRow.id,
                position,
            )
            rows = list(session.scalars(query.limit(limit + 1)))
            more, rows = len(rows) > limit, rows[:limit]
            following = self._token(rows[-1].create_time, rows[-1].id, scope) if more else ""
            return [delivery_proto(r) for r in rows], following

    def redeliver(
        self, principal: Principal, hook_id: str, delivery_id: str, request_id: str = ""
    ) -> webhook_pb2.Delivery:
        """The delivery's message again, as a new delivery of the log: the same message id
        and body, attempts and a retry window of its own."""
        now = self._now()
        with self._store.unit() as session:
            self._hook(session, principal.org, hook_id)
            known = ids.is_id(delivery_id, "whd")
            source = session.get(DeliveryRow, delivery_id) if known else None
            if source is None or (source.org, source.webhook_id) != (principal.org, hook_id):
                raise errors.NotFound()
            row = DeliveryRow(
                id=ids.new_id("whd"),
                org=principal.org,
                webhook_id=hook_id,
                message_id=source.message_id,
                event_type=source.event_type,
                payload=source.payload,
                dedupe=None,
                status=PENDING,
                attempts=0,
                last_status_code=0,
                last_error="",
                next_attempt_time=now,
                lease_owner="",
                redelivery_of=source.id,
                create_time=now,
                update_time=now,
            )
            session.add(row)
            audit.record(
                session,
                "training.webhook.redelivered",
                org=principal.org,
                subject=row.id,
                actor=principal.key_id,
                request_id=request_id,
                delivery=source.id,
            )
            mark(session, webhooks.topic())
            session.flush()
            return delivery_proto(row)
