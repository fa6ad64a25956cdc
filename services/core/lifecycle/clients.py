"""A training client: placed on an engine executor, ready once the engine loaded it, and
ended (deleted, failed, or lost with its executor). An end fails the calls not answered
and releases the client's hold."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.lifecycle.money import release_holds
from services.core.lifecycle.operations import operation_failed
from services.core.states import (
    CLIENT_GONE,
    CLIENT_MOVES,
    OPERATION_PENDING,
    ClientStatus,
    check_move,
)
from services.core.tables import ClientRow, OperationRow
from services.core.wakeups import future_topic, mark

C = ClientStatus


def client_ready(client: ClientRow, now: dt.datetime) -> bool:
    """Its engine answered the create: the client takes calls."""
    if not check_move(CLIENT_MOVES, client.status, C.READY):
        return False
    client.status, client.update_time = C.READY, now
    return True


def end_client(
    session: Session, client: ClientRow, target: ClientStatus, reason: str, now: dt.datetime
) -> bool:
    """No engine holds the client any more: its calls not answered fail `CLIENT_GONE`
    with the sentence for `reason`, its hold goes back."""
    if not check_move(CLIENT_MOVES, client.status, target):
        return False
    client.status, client.update_time = target, now
    client.reason = "" if target == C.DELETED else reason
    client.message = "" if target == C.DELETED else CLIENT_GONE.get(reason, "")
    client.lease_expires = None
    pending = session.scalars(
        sa.select(OperationRow).where(
            OperationRow.client_id == client.id, OperationRow.status.in_(OPERATION_PENDING)
        )
    ).all()
    for op in pending:
        operation_failed(op, "CLIENT_GONE", CLIENT_GONE.get(reason, ""), now)
    # Their callers wake to the answer at once, not at their next read.
    mark(session, *(future_topic(client.id, op.seq) for op in pending))
    release_holds(session, task_id=client.id, now=now)
    return True
