"""ListAuditEntries: the org's audit trail, newest first, each row with the key that made
it (its label, role and own org beside the org it acted in), filtered by key, action and
time. The org's admins and the operator read it; members do not (`roles.TABLE`), nor does
a key limited to projects, as the trail names every project's work."""

from __future__ import annotations

import datetime as dt
import re

import sqlalchemy as sa
from google.protobuf import struct_pb2, timestamp_pb2

from services.core import errors
from services.core.audit import AuditEvent
from services.core.auth import ApiKey, Principal
from services.core.pagetoken import PageTokens, page_size
from services.core.store import Store
from trainyard.org.v1 import audit_pb2

# A key's id (or the operator's commands' `admin-cli`), and an event name or its prefix.
ACTOR = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
ACTION = re.compile(r"^[a-z0-9_.]{1,96}\*?$")


def parse_time(field: str, value: str) -> dt.datetime | None:
    """An RFC 3339 time with its offset, or None when empty; anything else is refused
    naming the field."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value) if len(value) <= 40 else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise errors.ValidationError(field, "must be an RFC 3339 time with its offset")
    return parsed.astimezone(dt.UTC)


def to_proto(event: AuditEvent, key: ApiKey | None) -> audit_pb2.AuditEntry:
    created = timestamp_pb2.Timestamp()
    created.FromDatetime(event.create_time)
    details = struct_pb2.Struct()
    details.update(event.details or {})
    return audit_pb2.AuditEntry(
        id=event.id,
        create_time=created,
        org=event.org,
        action=event.name,
        subject=event.subject,
        code=event.code,
        key_id=event.actor,
        key_label=key.label if key else "",
        key_role=key.role if key else "",
        key_org=key.org if key else "",
        request_id=event.request_id,
        details=details,
    )


class Trail:
    def __init__(self, store: Store, tokens: PageTokens) -> None:
        self._store = store
        self._tokens = tokens

    def list(
        self,
        principal: Principal,
        *,
        actor: str,
        action: str,
        start_time: str,
        end_time: str,
        size: int,
        token: str,
    ) -> tuple[list[audit_pb2.AuditEntry], str]:
        if principal.projects:
            raise errors.PermissionDenied(
                "A key limited to projects does not read the org's trail.",
                metadata={"field": "projects"},
                fields=[("projects", "limit this key to some of the org's work")],
            )
        if actor and not ACTOR.fullmatch(actor):
            raise errors.ValidationError("actor", "must be a key's id")
        if action and not ACTION.fullmatch(action):
            raise errors.ValidationError(
                "action", "must be an event name, or its start followed by *"
            )
        start, end = parse_time("start_time", start_time), parse_time("end_time", end_time)
        limit = page_size(size)
        scope = {
            "org": principal.org,
            "method": "ListAuditEntries",
            "actor": actor,
            "action": action,
            "start_time": start_time,
            "end_time": end_time,
        }
        position = self._tokens.decode(token, scope)
        query = (
            sa.select(AuditEvent, ApiKey)
            .outerjoin(ApiKey, ApiKey.id == AuditEvent.actor)
            .where(AuditEvent.org == principal.org)
        )
        if actor:
            query = query.where(AuditEvent.actor == actor)
        if action.endswith("*"):
            query = query.where(AuditEvent.name.startswith(action[:-1], autoescape=True))
        elif action:
            query = query.where(AuditEvent.name == action)
        if start is not None:
            query = query.where(AuditEvent.create_time >= start)
        if end is not None:
            query = query.where(AuditEvent.create_time < end)
        if position is not None:
            query = query.where(AuditEvent.id < int(position["id"]))
        with self._store.unit(write=False) as session:
            rows = session.execute(query.order_by(AuditEvent.id.desc()).limit(limit + 1)).all()
            entries = [to_proto(event, key) for event, key in rows[:limit]]
        next_token = ""
        if len(rows) > limit:
            next_token = self._tokens.encode({"id": entries[-1].id}, scope)
        return entries, next_token
