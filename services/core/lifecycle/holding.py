"""What a job holds: the org's objects it produced or reads, each named once, kept at least
as long as the job's retention asks. ArtifactService names an object so when it grants it;
a job's preparation, when the org already stores the snapshot it made (the same rows
again), names it in its own transaction instead of asking for a grant."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from services.core import retention
from services.core.object_tables import JobArtifactRow, ObjectRow
from services.core.retention import Retention
from services.core.states import ObjectStatus


def stored_object(session: Session, org: str, sha256: str) -> ObjectRow | None:
    """The org's object holding these bytes, locked as a grant locks it; None unless they
    are stored (not yet granted, or granted and not yet read back)."""
    row = session.get(ObjectRow, (org, sha256), with_for_update=True)
    return row if row is not None and row.status == ObjectStatus.STORED else None


def hold(
    session: Session,
    row: ObjectRow,
    holder: str,
    *,
    kind: str,
    name: str,
    now: dt.datetime,
    kept: Retention | None = None,
    default_days: int = 0,
    new_holder: bool = False,
) -> None:
    """Name the object as one `holder` (a job, or a training client) produced or reads,
    unless it is named so already (never, for a `new_holder` the caller's unit made); a
    stored one is kept at least as long as `kept` asks."""
    if new_holder or session.get(JobArtifactRow, (row.org, holder, row.sha256)) is None:
        session.add(
            JobArtifactRow(
                org=row.org,
                job_id=holder,
                sha256=row.sha256,
                kind=kind,
                name=name,
                create_time=now,
            )
        )
    if kept is not None and row.status == ObjectStatus.STORED and row.expires_at is not None:
        later = retention.expiry(kept, now, default_days)
        row.expires_at = None if later is None else max(row.expires_at, later)
