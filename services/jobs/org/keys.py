"""CreateKey, ListKeys, GetKey, RevokeKey, RotateKey: the keys an org's admin hands out.

An org's admin (and the operator, in any org) makes and manages the org's `member`,
`admin` and `executor` keys; the deployment's own roles are made on the store only
(`trainyard admin create-key`) and answer here as unknown. A key limited to projects,
bases, a spend or a lifetime makes, sees and manages only keys within its own limits, so
no key hands out more than it holds. A secret is answered once, by the create or rotate
that made it; the store keeps its sha256 only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from google.protobuf import timestamp_pb2
from sqlalchemy.orm import Session

from services.core import audit, auth, errors, ids
from services.core import validation as v
from services.core.auth import ApiKey, Principal
from services.core.money import ledger
from services.core.money.rates import MICRO_CENTS_PER_CENT
from services.core.money.tables import EntryRow
from services.core.pagetoken import PageTokens, page_size
from services.core.store import Store, utcnow
from services.core.tables import JobRow
from trainyard.org.v1 import key_pb2, org_service_pb2

MAX_SCOPE = 64
# US cents: $100 million a month, far past any real cap and exact as a JSON number.
MAX_SPEND_CAP = 10**10
# Rows read at a time while paging keys that a limited caller sees only some of.
_BATCH = 200


def _ts(value: dt.datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def to_proto(row: ApiKey, *, spent: int, now: dt.datetime, secret: str = "") -> key_pb2.ApiKey:
    """A key as answered: never its hash, its secret only when just made (`secret`);
    `spent` is what its jobs were charged this month, in micro-cents."""
    key = key_pb2.ApiKey(
        id=row.id,
        org=row.org,
        role=row.role,
        label=row.label,
        projects=row.projects or [],
        bases=row.bases or [],
        spend_this_month=spent / MICRO_CENTS_PER_CENT,
        create_time=_ts(row.create_time),
        status=row.status(now),
    )
    if secret:
        key.secret = secret
    if row.monthly_spend_cap is not None:
        key.monthly_spend_cap = row.monthly_spend_cap
    for field, value in (
        ("expire_time", row.expire_time),
        ("revoke_time", row.revoke_time),
        ("last_used_time", row.last_used_time),
    ):
        if value is not None:
            getattr(key, field).CopyFrom(_ts(value))
    return key


def spent_by_key(
    session: Session, org: str, key_ids: Iterable[str], now: dt.datetime
) -> dict[str, int]:
    """What each key's jobs were charged this calendar month, in micro-cents, in one read."""
    wanted = list(key_ids)
    if not wanted:
        return {}
    rows = session.execute(
        sa.select(JobRow.key_id, sa.func.coalesce(sa.func.sum(EntryRow.micro_cents), 0))
        .join(JobRow, JobRow.id == EntryRow.job_id)
        .where(
            EntryRow.org == org,
            EntryRow.kind == "compute",
            EntryRow.create_time >= ledger.month_start(now),
            JobRow.org == org,
            JobRow.key_id.in_(wanted),
        )
        .group_by(JobRow.key_id)
    ).all()
    return {str(key_id): -int(total or 0) for key_id, total in rows}


def _subset(mine: Sequence[str], theirs: Sequence[str] | None) -> bool:
    return not mine or (bool(theirs) and set(theirs or ()) <= set(mine))


def within(principal: Principal, row: ApiKey) -> bool:
    """Whether a key is no wider than the caller's own limits: a limited key sees and
    manages only such keys (itself among them)."""
    if row.id == principal.key_id:
        return True
    cap, expires = principal.spend_cap_cents, principal.expire_time
    return (
        _subset(principal.projects, row.projects)
        and _subset(principal.bases, row.bases)
        and (cap is None or (row.monthly_spend_cap is not None and row.monthly_spend_cap <= cap))
        and (expires is None or (row.expire_time is not None and row.expire_time <= expires))
    )


def _visible(principal: Principal, row: ApiKey | None) -> bool:
    return (
        row is not None
        and row.org == principal.org
        and row.role in auth.ORG_ROLES
        and within(principal, row)
    )


def _scope(field: str, values: Sequence[str], pattern: str) -> list[str]:
    if len(values) > MAX_SCOPE:
        raise errors.ValidationError(field, f"must name at most {MAX_SCOPE}")
    regex = v.PROJECT if pattern == "project" else v.NAME
    what = "lower-case letters, digits and dashes" if pattern == "project" else "base names"
    for value in values:
        v.check_identifier(field, value, regex, what)
    return sorted(set(values))


def _beyond(field: str) -> errors.PermissionDenied:
    return errors.PermissionDenied(
        "This key may make only keys within its own limits.",
        metadata={"field": field},
        fields=[(field, "is past this key's own limits")],
    )


def _check_role(principal: Principal, role: str) -> None:
    if not role:
        raise errors.ValidationError("role", "is required")
    if role not in auth.ROLES:
        raise errors.ValidationError(
            "role",
            "is not one of the accepted values",
            metadata={"supported": ",".join(auth.ORG_ROLES)},
        )
    if role not in auth.ORG_ROLES:
        # The deployment's roles act across orgs: no org's key hands one out.
        raise errors.PermissionDenied(
            "Only an org's roles are made here; metadata.supported names them.",
            metadata={"field": "role", "supported": ",".join(auth.ORG_ROLES)},
            fields=[("role", "is not a role an org's key may make")],
        )


class Keys:
    """The org's keys, through its admin's (or the operator's) key."""

    def __init__(self, store: Store, tokens: PageTokens) -> None:
        self._store = store
        self._tokens = tokens

    def create(
        self, principal: Principal, request: org_service_pb2.CreateKeyRequest
    ) -> key_pb2.ApiKey:
        _check_role(principal, request.role)
        if request.label:
            v.check_identifier("label", request.label, v.LABEL, "1 to 64 letters, digits or ._@-")
        projects = _scope("projects", request.projects, "project")
        bases = _scope("bases", request.bases, "base")
        cap = request.monthly_spend_cap if request.HasField("monthly_spend_cap") else None
        if cap is not None and not 0 <= cap <= MAX_SPEND_CAP:
            raise errors.ValidationError(
                "monthly_spend_cap", "must be between 0 and 10000000000 US cents"
            )
        ttl = request.ttl_seconds if request.HasField("ttl_seconds") else None
        if ttl is not None and not 1 <= ttl <= auth.MAX_TTL_SECONDS:
            raise errors.ValidationError("ttl_seconds", "must be between 1 and 157680000")
        now = utcnow()
        # A limited key hands out no more than it holds, field by field.
        if principal.projects and not _subset(principal.projects, projects):
            raise _beyond("projects")
        if principal.bases and not _subset(principal.bases, bases):
            raise _beyond("bases")
        if principal.spend_cap_cents is not None and (
            cap is None or cap > principal.spend_cap_cents
        ):
            raise _beyond("monthly_spend_cap")
        if principal.expire_time is not None and (
            ttl is None or now + dt.timedelta(seconds=ttl) > principal.expire_time
        ):
            raise _beyond("ttl_seconds")
        with self._store.unit() as session:
            key_id, secret = auth.create_key(
                session,
                org=principal.org,
                role=request.role,
                label=request.label,
                projects=projects,
                bases=bases,
                monthly_spend_cap=cap,
                ttl_seconds=ttl,
                now=now,
            )
            audit.record(
                session,
                "training.key.created",
                org=principal.org,
                subject=key_id,
                role=request.role,
                limited=bool(projects or bases or cap is not None or ttl is not None),
            )
            session.flush()
            row = session.get(ApiKey, key_id)
            assert row is not None
            return to_proto(row, spent=0, now=now, secret=secret)

    def _row(
        self, session: Session, principal: Principal, key_id: str, *, lock: bool = False
    ) -> ApiKey:
        row = (
            session.get(ApiKey, key_id, with_for_update=lock) if ids.is_id(key_id, "key") else None
        )
        if row is None or not _visible(principal, row):
            raise errors.NotFound()
        return row

    def get(self, principal: Principal, key_id: str) -> key_pb2.ApiKey:
        now = utcnow()
        with self._store.unit(write=False) as session:
            row = self._row(session, principal, key_id)
            spent = spent_by_key(session, principal.org, [row.id], now).get(row.id, 0)
            return to_proto(row, spent=spent, now=now)

    def own(self, principal: Principal) -> key_pb2.ApiKey:
        """The calling key itself, whatever its role (the limits' `key`)."""
        now = utcnow()
        with self._store.unit(write=False) as session:
            row = session.get(ApiKey, principal.key_id)
            if row is None:
                raise errors.Unauthenticated()
            spent = ledger.key_spent(session, principal.org, row.id, now)
            return to_proto(row, spent=spent, now=now)

    def list(
        self, principal: Principal, *, size: int, token: str
    ) -> tuple[list[key_pb2.ApiKey], str, int]:
        """A page of the org's keys the caller may see, newest first; the next page's
        token and how many it may see in all."""
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListKeys", "key": principal.key_id}
        position = self._tokens.decode(token, scope)
        after = (
            (dt.datetime.fromisoformat(str(position["t"])), str(position["id"]))
            if position
            else None
        )
        now = utcnow()
        base = sa.select(ApiKey).where(ApiKey.org == principal.org, ApiKey.role.in_(auth.ORG_ROLES))
        with self._store.unit(write=False) as session:
            if principal.limited:
                # Limits are JSON lists: counted as the caller sees them, row by row.
                total = sum(1 for row in session.scalars(base) if within(principal, row))
            else:
                total = session.scalar(sa.select(sa.func.count()).select_from(base.subquery())) or 0
            rows: list[ApiKey] = []
            cursor = after
            while len(rows) <= limit:
                query = base
                if cursor is not None:
                    time, last = cursor
                    query = query.where(
                        sa.or_(
                            ApiKey.create_time < time,
                            sa.and_(ApiKey.create_time == time, ApiKey.id < last),
                        )
                    )
                batch = session.scalars(
                    query.order_by(ApiKey.create_time.desc(), ApiKey.id.desc()).limit(_BATCH)
                ).all()
                rows.extend(row for row in batch if within(principal, row))
                if len(batch) < _BATCH:
                    break
                cursor = (batch[-1].create_time, batch[-1].id)
            page = rows[:limit]
            spent = spent_by_key(session, principal.org, [r.id for r in page], now)
            keys = [to_proto(r, spent=spent.get(r.id, 0), now=now) for r in page]
            next_token = ""
            if len(rows) > limit:
                last_row = page[-1]
                next_token = self._tokens.encode(
                    {"t": last_row.create_time.isoformat(), "id": last_row.id}, scope
                )
            return keys, next_token, int(total)

    def revoke(self, principal: Principal, key_id: str) -> key_pb2.ApiKey:
        """Revoke at once: every process reads the key per call, so the next call after
        this commits is refused. Repeating it keeps the first revoke's time."""
        now = utcnow()
        with self._store.unit() as session:
            row = self._row(session, principal, key_id, lock=True)
            if row.revoke_time is None:
                row.revoke_time = now
                audit.record(session, "training.key.revoked", org=principal.org, subject=row.id)
            spent = spent_by_key(session, principal.org, [row.id], now).get(row.id, 0)
            return to_proto(row, spent=spent, now=now)

    def rotate(self, principal: Principal, key_id: str) -> key_pb2.ApiKey:
        """A new secret for the same key, answered once; the old one is refused from the
        next call on."""
        now = utcnow()
        with self._store.unit() as session:
            row = self._row(session, principal, key_id, lock=True)
            if (status := row.status(now)) != "active":
                raise errors.InvalidTransition(
                    "A revoked or expired key cannot be rotated; make a new one.",
                    metadata={"status": status},
                )
            secret = auth.rotate_key(session, row, now)
            audit.record(session, "training.key.rotated", org=principal.org, subject=row.id)
            spent = spent_by_key(session, principal.org, [row.id], now).get(row.id, 0)
            return to_proto(row, spent=spent, now=now, secret=secret)
