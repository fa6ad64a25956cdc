"""The queries ClientService and the executor streams make of the clients (each a lease on
one engine executor, as a task's) and their operations (one row per `(client, seq)`,
which makes a retried call answer the first one's future)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import ids, limits
from services.core.states import CLIENT_LIVE, OPERATION_PENDING, OperationStatus
from services.core.tables import ClientRow, OperationRow

# How many of a client's latest answered calls its estimates average.
RECENT_CALLS = 8


def client(session: Session, client_id: str, *, lock: bool = False) -> ClientRow | None:
    if not ids.is_id(client_id, "cli"):
        return None
    return session.get(ClientRow, client_id, with_for_update=lock, populate_existing=lock)


def owned(session: Session, org: str, client_id: str, *, lock: bool = False) -> ClientRow | None:
    """The org's client; another org's answers exactly as an unknown one."""
    row = client(session, client_id, lock=lock)
    return row if row is not None and row.org == org else None


def operation(session: Session, client_id: str, seq: int) -> OperationRow | None:
    return session.scalar(
        sa.select(OperationRow).where(OperationRow.client_id == client_id, OperationRow.seq == seq)
    )


def future(session: Session, future_id: str) -> OperationRow | None:
    return session.get(OperationRow, future_id) if ids.is_id(future_id, "fut") else None


def last_seq(session: Session, client_id: str) -> int:
    found = session.scalar(
        sa.select(sa.func.max(OperationRow.seq)).where(OperationRow.client_id == client_id)
    )
    return -1 if found is None else int(found)


def ahead(session: Session, op: OperationRow) -> int:
    """The client's operations not answered that come before `op`."""
    return int(
        session.scalar(
            sa.select(sa.func.count()).where(
                OperationRow.client_id == op.client_id,
                OperationRow.status.in_(OPERATION_PENDING),
                OperationRow.seq < op.seq,
            )
        )
        or 0
    )


def skip_answered(session: Session, client: ClientRow) -> None:
    """Move the client's last applied number past calls answered out of turn (failed at
    their deadline while a call before them ran), so the next pending call goes next."""
    while (following := operation(session, client.id, client.seq + 1)) is not None:
        if following.status in OPERATION_PENDING:
            return
        client.seq = following.seq


def recent_seconds(session: Session, client_id: str, count: int = RECENT_CALLS) -> list[float]:
    """The engine-seconds of the client's last `count` answered calls, newest first."""
    return [
        float(s)
        for s in session.scalars(
            sa.select(OperationRow.seconds)
            .where(
                OperationRow.client_id == client_id,
                OperationRow.status == OperationStatus.DONE,
                OperationRow.kind != "create",
            )
            .order_by(OperationRow.seq.desc())
            .limit(count)
        )
    ]


def waiting(session: Session, limit: int = 500) -> Sequence[OperationRow]:
    """Calls of live clients not yet sent to their engine: those a deadline may fail."""
    return session.scalars(
        sa.select(OperationRow)
        .join(ClientRow, ClientRow.id == OperationRow.client_id)
        .where(
            ClientRow.status.in_(CLIENT_LIVE),
            OperationRow.status == OperationStatus.QUEUED,
            OperationRow.kind != "create",
        )
        .order_by(OperationRow.create_time)
        .limit(limit)
    ).all()


def live_on(session: Session, executor_ids: Sequence[str]) -> Sequence[ClientRow]:
    return session.scalars(
        sa.select(ClientRow).where(
            ClientRow.executor_id.in_(executor_ids), ClientRow.status.in_(CLIENT_LIVE)
        )
    ).all()


def live_count(session: Session, *, org: str = "", executor_id: str = "") -> int:
    if org and not executor_id:
        return limits.live_clients(session, org)
    query = sa.select(sa.func.count()).where(ClientRow.status.in_(CLIENT_LIVE))
    if org:
        query = query.where(ClientRow.org == org)
    if executor_id:
        query = query.where(ClientRow.executor_id == executor_id)
    return int(session.scalar(query) or 0)


def next_operations(session: Session, executor_id: str) -> Sequence[tuple[ClientRow, OperationRow]]:
    """For each live client on the executor, the operation it applies next, if it came."""
    rows = session.execute(
        sa.select(ClientRow, OperationRow)
        .join(OperationRow, OperationRow.client_id == ClientRow.id)
        .where(
            ClientRow.executor_id == executor_id,
            ClientRow.status.in_(CLIENT_LIVE),
            OperationRow.seq == ClientRow.seq + 1,
            OperationRow.status.in_(OPERATION_PENDING),
        )
    ).all()
    return [(row[0], row[1]) for row in rows]


def lapsed(session: Session, now: dt.datetime) -> Sequence[ClientRow]:
    return session.scalars(
        sa.select(ClientRow)
        .where(ClientRow.status.in_(CLIENT_LIVE), ClientRow.lease_expires <= now)
        .limit(100)
        .with_for_update(skip_locked=True)
    ).all()


def page(
    session: Session, org: str, status: str, offset: int, size: int
) -> tuple[Sequence[ClientRow], int]:
    query = sa.select(ClientRow).where(ClientRow.org == org)
    if status:
        query = query.where(ClientRow.status == status)
    total = int(session.scalar(sa.select(sa.func.count()).select_from(query.subquery())) or 0)
    rows = session.scalars(
        query.order_by(ClientRow.create_time.desc(), ClientRow.id.desc()).offset(offset).limit(size)
    ).all()
    return rows, total


def live_counts(session: Session, executor_ids: Sequence[str]) -> dict[str, int]:
    rows = session.execute(
        sa.select(ClientRow.executor_id, sa.func.count())
        .where(ClientRow.executor_id.in_(executor_ids), ClientRow.status.in_(CLIENT_LIVE))
        .group_by(ClientRow.executor_id)
    ).all()
    return {str(r[0]): int(r[1]) for r in rows}
