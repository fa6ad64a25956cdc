"""The counts an org's work is refused past, read where the refusal checks them and where
`GET /v1/train/limits` answers them, so the two never disagree."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.object_tables import ObjectRow
from services.core.states import CLIENT_LIVE, ObjectStatus
from services.core.tables import ClientRow

# The most bytes an org may hold granted for upload and not yet confirmed (`PENDING_LIMIT`).
PENDING_LIMIT_BYTES = 128 * 1024**3


def pending_bytes(session: Session, org: str, *, besides: str = "") -> int:
    """The bytes the org was granted and has not confirmed, but for the object `besides`."""
    pending = session.scalar(
        sa.select(sa.func.coalesce(sa.func.sum(ObjectRow.size), 0)).where(
            ObjectRow.org == org,
            ObjectRow.status == ObjectStatus.PENDING,
            ObjectRow.sha256 != besides,
        )
    )
    return int(pending or 0)


def live_clients(session: Session, org: str) -> int:
    """The org's training clients that hold (or are placing) an engine."""
    query = sa.select(sa.func.count()).where(
        ClientRow.org == org, ClientRow.status.in_(CLIENT_LIVE)
    )
    return int(session.scalar(query) or 0)
