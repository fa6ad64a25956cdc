"""A money hold's one move: a window held for a task or a client is released once it ends,
charged through its last meter; what it held beyond that goes back to the wallet."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.money.tables import HoldRow
from services.core.states import HOLD_MOVES, HoldStatus, check_move


def release_holds(
    session: Session, *, job_id: str = "", task_id: str = "", now: dt.datetime
) -> None:
    """End the live holds of a task (or a client), or every one of a job's."""
    query = sa.select(HoldRow).where(HoldRow.status == HoldStatus.LIVE)
    query = (
        query.where(HoldRow.task_id == task_id)
        if task_id
        else query.where(HoldRow.job_id == job_id)
    )
    for hold in session.scalars(query):
        check_move(HOLD_MOVES, hold.status, HoldStatus.RELEASED)
        hold.held_seconds, hold.status, hold.update_time = (
            hold.used_seconds,
            HoldStatus.RELEASED,
            now,
        )
