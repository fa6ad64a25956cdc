"""The durable audit trail: reserved event names, ids and codes, never a request body.

Every row names the key whose call made it (`actor`, a key id) and the call's request id:
a writer that names neither gets the current request's, so no row an RPC writes is
anonymous; rows of the services' own loops (a sweep, a lease that lapsed) name none."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from services.core import context
from services.core.store import Base, UtcDateTime, utcnow

# The names the seeds reserve, and the ones later capabilities add.
NAMES = frozenset(
    {
        "training.job.create.accepted",
        "training.job.create.rejected",
        "training.job.state.transitioned",
        "training.job.cancel.accepted",
        "training.job.cancel.rejected",
        "training.job.retry.accepted",
        "training.job.publish.accepted",
        "training.job.publish.rejected",
        "training.artifact.placeholder.registered",
        "training.artifact.provenance.recorded",
        "training.artifact.deleted",
        "training.artifact.retention.swept",
        "training.artifact.pinned",
        "training.artifact.unpinned",
        "training.artifact.extended",
        "training.bom.audit.passed",
        "training.bom.audit.failed",
        "training.claim.platform",
        "training.client.created",
        "training.client.deleted",
        "training.data_source.created",
        "training.data_source.deleted",
        "training.webhook.created",
        "training.webhook.deleted",
        "training.webhook.redelivered",
        "training.wallet.credited",
        "training.wallet.capped",
        "training.rate.set",
        "training.org.acted_in",
        "platform.key.created",
        "training.key.created",
        "training.key.revoked",
        "training.key.rotated",
    }
)


class AuditEvent(Base):
    __tablename__ = "audit_events"
    __table_args__ = (
        sa.Index("ix_audit_events_org_name", "org", "name"),
        # The trail read newest first, and one key's part of it.
        sa.Index("ix_audit_events_org_id", "org", "id"),
        sa.Index("ix_audit_events_org_actor", "org", "actor"),
    )

    id: Mapped[int] = mapped_column(
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    org: Mapped[str] = mapped_column(sa.String(63))
    name: Mapped[str] = mapped_column(sa.String(96))
    subject: Mapped[str] = mapped_column(sa.String(96), default="", server_default="")
    code: Mapped[str] = mapped_column(sa.String(64), default="", server_default="")
    actor: Mapped[str] = mapped_column(sa.String(32), default="", server_default="")
    request_id: Mapped[str] = mapped_column(sa.String(64), default="", server_default="")
    details: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())


def record(
    session: Session,
    name: str,
    *,
    org: str,
    subject: str = "",
    code: str = "",
    actor: str = "",
    request_id: str = "",
    **details: str | int | float | bool | None,
) -> None:
    """Append one audit row in the caller's transaction. Details hold ids and codes only.
    `actor` and `request_id` default to the current request's key and id."""
    if name not in NAMES:
        raise ValueError("unreserved audit name")
    if not actor and (who := context.principal_var.get()) is not None:
        actor = who.key_id
    request_id = request_id or context.request_id.get()
    session.add(
        AuditEvent(
            org=org,
            name=name,
            subject=subject,
            code=code,
            actor=actor,
            request_id=request_id,
            details=dict(details),
            create_time=utcnow(),
        )
    )
