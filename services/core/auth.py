"""API keys and the principal a request acts as.

A key is 32 random bytes shown once; the store keeps only its sha256 (a key has full
entropy, so a fast hash is enough, as GitHub and Stripe tokens do). Each key carries an
org and a role. The org of every request is the key's, never a body, query or path
value. Only the two deployment-wide roles, platform and operator, may act in another
org, by the `x-org-id` header; which methods each role may call is `roles.TABLE`.

A key may also be limited: to projects (it sees and acts on their jobs only), to bases,
to a monthly spend of its jobs, and in time (`expire_time`). A rotated key keeps its id
and limits under a new secret; the old secret's hash is kept apart (`RetiredKeyHash`) so
a call with it is told it was rotated.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import hashlib
import re
import secrets
import time
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import errors
from services.core.ids import new_id
from services.core.store import Base, UtcDateTime, utcnow

# One line each, for `trainyard admin create-key --help` and the README.
ROLE_HELP = {
    "member": "an org's user: jobs, artifacts, models, estimates, wallet reads",
    "admin": "an org's administrator: what a member may do, in its own org only",
    "executor": "an org's machine: claims tasks, reports, registers outputs; no more",
    "platform": "the deployment's own services; never a person's key",
    "platform-machine": "the platform's own executor: claims the tasks no machine was named "
    "for, in any org; no more",
    "operator": "a person across orgs: an admin's work in any org, sweeps, rates, credits",
}
ROLES = tuple(ROLE_HELP)
# The roles an org's admin makes and manages over the API; the deployment's own roles are
# made on the store only (`trainyard admin create-key`).
ORG_ROLES = ("member", "admin", "executor")
# The longest a key made with a lifetime may live: five years.
MAX_TTL_SECONDS = 5 * 365 * 24 * 3600
# The roles that may name another org in `x-org-id`; every such call is audited.
CROSS_ORG = frozenset({"platform", "platform-machine", "operator"})
KEY_PREFIX = "ty_"
# What a key looks like: the prefix and URL-safe base64 (a created key's 43 characters).
KEY_SHAPE = re.compile(r"^ty_[A-Za-z0-9_-]{16,125}$")
# Where a key comes from, said by every refusal of one.
_WHERE = (
    " An org's keys are made by the deployment's operator with"
    " `trainyard admin create-key --org <org> --role <role>`, or by the org's admin with"
    " `trainyard admin keys create`."
)
# Why a request's credential was refused, and what to do; said as `metadata.problem` and the
# detail. A key is said to be revoked only to a caller who presents its whole secret (its
# hash matches), so a guess learns no more than that it is unknown.
PROBLEMS = {
    "missing": "No API key was sent; send one as `Authorization: Bearer <key>`." + _WHERE,
    "malformed": "The credential is not an API key sent as `Authorization: Bearer ty_…`." + _WHERE,
    "unknown": "The API key is not one this deployment made; check it was copied whole." + _WHERE,
    "revoked": "The API key was revoked; use a new one." + _WHERE,
    "expired": "The API key expired; use a new one." + _WHERE,
    "rotated": "The API key was rotated: its new secret replaced this one; use that.",
}
ORG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63), index=True)
    role: Mapped[str] = mapped_column(sa.String(16))
    key_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    label: Mapped[str] = mapped_column(sa.String(64), default="", server_default="")
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    revoke_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # The projects and bases it is limited to; None (or empty): all of them.
    projects: Mapped[list[str] | None] = mapped_column(sa.JSON(), nullable=True)
    bases: Mapped[list[str] | None] = mapped_column(sa.JSON(), nullable=True)
    # US cents its jobs may be charged a calendar month; None: no cap of its own.
    monthly_spend_cap: Mapped[int | None] = mapped_column(sa.BigInteger(), nullable=True)
    expire_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # When a call last presented it, written at most once a `USED_EVERY` per process.
    last_used_time: Mapped[dt.datetime | None] = mapped_column(UtcDateTime(), nullable=True)

    def status(self, now: dt.datetime) -> str:
        """`revoked`, `expired` or `active`."""
        if self.revoke_time is not None:
            return "revoked"
        if self.expire_time is not None and self.expire_time <= now:
            return "expired"
        return "active"


class RetiredKeyHash(Base):
    """The hash of a secret a rotation replaced, so a call with it is refused as rotated
    rather than unknown."""

    __tablename__ = "retired_key_hashes"

    key_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(sa.String(32), index=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    retire_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


# How often a key's `last_used_time` is written: reads of it are to within this.
USED_EVERY = dt.timedelta(minutes=1)


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who a request acts as: the key's id, the org it acts in, its role, and the org the
    key was made for when that is another (`x-org-id`)."""

    key_id: str
    org: str
    role: str
    key_org: str = ""
    # The key's limits (`ApiKey`): empty tuples limit nothing; None is no cap or expiry.
    projects: tuple[str, ...] = ()
    bases: tuple[str, ...] = ()
    spend_cap_cents: int | None = None
    expire_time: dt.datetime | None = None
    # When the store last recorded the key used (see `USED_EVERY`).
    last_used_time: dt.datetime | None = None

    @property
    def is_platform(self) -> bool:
        """The deployment's own services' credential."""
        return self.role == "platform"

    @property
    def runs_platform_tasks(self) -> bool:
        """The platform's executor: it claims the tasks (and training clients) no machine
        was named for, in whichever org. The services' credential may too."""
        return self.role in ("platform", "platform-machine")

    @property
    def acts_outside(self) -> bool:
        """Whether it acts in an org other than its key's own."""
        return bool(self.key_org) and self.key_org != self.org

    @property
    def limited(self) -> bool:
        """Whether the key carries any limit of its own."""
        return bool(
            self.projects
            or self.bases
            or self.spend_cap_cents is not None
            or self.expire_time is not None
        )

    def sees_project(self, project: str) -> bool:
        """Whether the key may see and act on the project's jobs."""
        return not self.projects or project in self.projects

    def check_project(self, project: str) -> None:
        """A project the key is not limited to is PERMISSION_DENIED naming `project`."""
        if not self.sees_project(project):
            raise errors.PermissionDenied(
                "This key is limited to other projects.",
                metadata={"field": "project"},
                fields=[("project", "is not one this key is limited to")],
            )

    def check_base(self, base: str) -> None:
        """A base the key is not limited to is PERMISSION_DENIED naming `base_model`."""
        if self.bases and base not in self.bases:
            raise errors.PermissionDenied(
                "This key is limited to other bases.",
                metadata={"field": "base_model"},
                fields=[("base_model", "is not one this key is limited to")],
            )


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(
    session: Session,
    *,
    org: str,
    role: str,
    label: str = "",
    projects: Sequence[str] = (),
    bases: Sequence[str] = (),
    monthly_spend_cap: int | None = None,
    ttl_seconds: int | None = None,
    now: dt.datetime | None = None,
) -> tuple[str, str]:
    """Store a new key and return `(key_id, key)`; the key is not kept anywhere."""
    if not ORG_PATTERN.match(org):
        raise errors.ValidationError("org", "must be 1 to 63 lower-case letters, digits or dashes")
    if role not in ROLES:
        raise errors.ValidationError("role", "must be one of " + ", ".join(ROLES))
    now = now or utcnow()
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = new_id("key")
    session.add(
        ApiKey(
            id=key_id,
            org=org,
            role=role,
            key_hash=hash_key(key),
            label=label[:64],
            create_time=now,
            projects=list(projects) or None,
            bases=list(bases) or None,
            monthly_spend_cap=monthly_spend_cap,
            expire_time=None if ttl_seconds is None else now + dt.timedelta(seconds=ttl_seconds),
        )
    )
    return key_id, key


def revoke_key(session: Session, key_id: str) -> bool:
    """Revoke a key by its id; False when there is no such key. Revoking twice is once."""
    row = session.get(ApiKey, key_id)
    if row is None:
        return False
    if row.revoke_time is None:
        row.revoke_time = utcnow()
    return True


def rotate_key(session: Session, row: ApiKey, now: dt.datetime) -> str:
    """Give a key a new secret, keeping the old one's hash as retired; the new secret."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    session.add(RetiredKeyHash(key_hash=row.key_hash, key_id=row.id, org=row.org, retire_time=now))
    row.key_hash = hash_key(key)
    return key


def refused(problem: str) -> errors.Unauthenticated:
    """The refusal of a credential, saying which problem it has and where a key comes from."""
    return errors.Unauthenticated(PROBLEMS[problem], metadata={"problem": problem})


_BY_HASH = sa.select(
    ApiKey.id,
    ApiKey.org,
    ApiKey.role,
    ApiKey.projects,
    ApiKey.bases,
    ApiKey.monthly_spend_cap,
    ApiKey.expire_time,
    ApiKey.revoke_time,
    ApiKey.last_used_time,
).where(ApiKey.key_hash == sa.bindparam("key_hash"))


def authenticate(
    session: Session,
    key: str | None,
    acting_org: str | None = None,
    *,
    now: dt.datetime | None = None,
) -> Principal:
    """Resolve a presented key; anything but a live key is UNAUTHENTICATED, saying which
    problem it has (`PROBLEMS`)."""
    if not key:
        raise refused("missing")
    if not KEY_SHAPE.match(key):
        raise refused("malformed")
    key_hash = hash_key(key)
    # Plain columns, not an ORM object: this runs on every call of every service.
    row = session.execute(_BY_HASH, {"key_hash": key_hash}).one_or_none()
    if row is None:
        if session.get(RetiredKeyHash, key_hash) is not None:
            raise refused("rotated")
        raise refused("unknown")
    now = now or utcnow()
    if row.revoke_time is not None:
        raise refused("revoked")
    if row.expire_time is not None and row.expire_time <= now:
        raise refused("expired")
    org = row.org
    if acting_org and acting_org != row.org:
        if row.role not in CROSS_ORG:
            raise errors.PermissionDenied(
                "This key's role may not act in another org; metadata.roles names those that may.",
                metadata={"roles": ",".join(sorted(CROSS_ORG))},
            )
        if not ORG_PATTERN.match(acting_org):
            raise errors.ValidationError("x-org-id", "is not an org name")
        org = acting_org
    return Principal(
        key_id=row.id,
        org=org,
        role=row.role,
        key_org=row.org,
        projects=tuple(row.projects or ()),
        bases=tuple(row.bases or ()),
        spend_cap_cents=row.monthly_spend_cap,
        expire_time=row.expire_time,
        last_used_time=row.last_used_time,
    )


def mark_used(session: Session, key_id: str, now: dt.datetime) -> None:
    """Record that a key was presented now (a conditional write: a process that lost the
    race to another writes nothing)."""
    session.execute(
        sa.update(ApiKey)
        .where(
            ApiKey.id == key_id,
            sa.or_(ApiKey.last_used_time.is_(None), ApiKey.last_used_time < now - USED_EVERY),
        )
        .values(last_used_time=now)
    )


class BadKeys:
    """Keys that just failed authentication, by hash, with the problem each had, so a flood
    of them costs no database lookup each. Bounded (the oldest go first) and short-lived: a
    key is random, so one created later was never refused here, and a refusal is forgotten
    in seconds."""

    def __init__(self, size: int = 10_000, seconds: float = 30.0) -> None:
        self._size = size
        self._seconds = seconds
        self._until: collections.OrderedDict[str, tuple[float, str]] = collections.OrderedDict()

    def problem(self, key_hash: str) -> str | None:
        """The problem the key had when it was last refused, if that was seconds ago."""
        found = self._until.get(key_hash)
        if found is None:
            return None
        if found[0] <= time.monotonic():
            del self._until[key_hash]
            return None
        return found[1]

    def add(self, key_hash: str, problem: str) -> None:
        self._until[key_hash] = (time.monotonic() + self._seconds, problem)
        self._until.move_to_end(key_hash)
        while len(self._until) > self._size:
            self._until.popitem(last=False)


def bearer(metadata: dict[str, str]) -> str | None:
    """The key of an `authorization: Bearer …` header, or of `x-api-key`; None when neither
    is sent. An `authorization` header of another scheme (a key without `Bearer `) is
    refused as malformed."""
    auth = metadata.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    if auth.strip():
        raise refused("malformed")
    return metadata.get("x-api-key") or None
