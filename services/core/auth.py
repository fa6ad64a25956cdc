"""API keys and the principal a request acts as.

A key is 32 random bytes shown once; the store keeps only its sha256 (a key has full
entropy, so a fast hash is enough, as GitHub and Stripe tokens do). Each key carries an
org and a role. The org of every request is the key's, never a body, query or path
value. Only the two deployment-wide roles, platform and operator, may act in another
org, by the `x-org-id` header; which methods each role may call is `roles.TABLE`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
import secrets

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
    "platform": "the deployment's own services and executor; never a person's key",
    "operator": "a person across orgs: an admin's work in any org, sweeps, rates, credits",
}
ROLES = tuple(ROLE_HELP)
# The roles that may name another org in `x-org-id`; every such call is audited.
CROSS_ORG = frozenset({"platform", "operator"})
KEY_PREFIX = "ty_"
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


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who a request acts as: the key's id, the org it acts in, its role, and the org the
    key was made for when that is another (`x-org-id`)."""

    key_id: str
    org: str
    role: str
    key_org: str = ""

    @property
    def is_platform(self) -> bool:
        """The deployment's own credential: the services and the platform's executor."""
        return self.role == "platform"

    @property
    def acts_outside(self) -> bool:
        """Whether it acts in an org other than its key's own."""
        return bool(self.key_org) and self.key_org != self.org


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(session: Session, *, org: str, role: str, label: str = "") -> tuple[str, str]:
    """Store a new key and return `(key_id, key)`; the key is not kept anywhere."""
    if not ORG_PATTERN.match(org):
        raise errors.ValidationError("org", "must be 1 to 63 lower-case letters, digits or dashes")
    if role not in ROLES:
        raise errors.ValidationError("role", "must be one of " + ", ".join(ROLES))
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = new_id("key")
    session.add(
        ApiKey(
            id=key_id,
            org=org,
            role=role,
            key_hash=hash_key(key),
            label=label[:64],
            create_time=utcnow(),
        )
    )
    return key_id, key


def authenticate(session: Session, key: str | None, acting_org: str | None = None) -> Principal:
    """Resolve a presented key; anything but a live key is UNAUTHENTICATED."""
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 128:
        raise errors.Unauthenticated()
    row = session.scalar(
        sa.select(ApiKey).where(ApiKey.key_hash == hash_key(key), ApiKey.revoke_time.is_(None))
    )
    if row is None:
        raise errors.Unauthenticated()
    org = row.org
    if acting_org and acting_org != row.org:
        if row.role not in CROSS_ORG:
            raise errors.PermissionDenied()
        if not ORG_PATTERN.match(acting_org):
            raise errors.ValidationError("x-org-id", "is not an org name")
        org = acting_org
    return Principal(key_id=row.id, org=org, role=row.role, key_org=row.org)


def bearer(metadata: dict[str, str]) -> str | None:
    """The key of an `authorization: Bearer …` header, or of `x-api-key`."""
    auth = metadata.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return metadata.get("x-api-key") or None
