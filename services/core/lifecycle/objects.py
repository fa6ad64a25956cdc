"""A stored object's one move: granted bytes are kept once their upload reads back as
granted. A grant inserts the row `pending`; a deletion removes it."""

from __future__ import annotations

import datetime as dt

from services.core.object_tables import ObjectRow
from services.core.states import OBJECT_MOVES, ObjectStatus, check_move


def object_stored(row: ObjectRow, now: dt.datetime, expires_at: dt.datetime | None) -> bool:
    """The upload read back as granted: kept until `expires_at`, its grant spent. False
    when it was stored before."""
    if not check_move(OBJECT_MOVES, row.status, ObjectStatus.STORED):
        return False
    row.status, row.stored_time, row.upload_id, row.grant_expires = (
        ObjectStatus.STORED,
        now,
        "",
        None,
    )
    row.expires_at = expires_at
    return True
