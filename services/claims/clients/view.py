"""How training clients and their calls read: the rows as the API answers them, and a
failed call's error as a caller waiting in-line meets it."""

from __future__ import annotations

from typing import Any

import grpc
import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.claims.clients import requests, store
from services.core import errors
from services.core.states import OPERATION_PENDING, OperationStatus
from services.core.tables import ClientRow, OperationRow
from services.core.view import ts
from trainyard.client.v1 import client_pb2


def creates(session: Session, client_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each client's create input (what it loaded, and `from` what), by client id."""
    if not client_ids:
        return {}
    rows = session.execute(
        sa.select(OperationRow.client_id, OperationRow.input).where(
            OperationRow.client_id.in_(client_ids), OperationRow.seq == 0
        )
    ).all()
    return {client_id: dict(given or {}) for client_id, given in rows}


def client_proto(
    row: ClientRow, session: Session, create: dict[str, Any] | None = None
) -> client_pb2.TrainingClient:
    """The client as the API answers it; `create` is its create's input, read when not
    given."""
    if create is None:
        create = creates(session, [row.id]).get(row.id, {})
    out = client_pb2.TrainingClient(
        id=row.id,
        base_model=row.base_model,
        status=row.status,
        reason=row.reason,
        message=row.message,
        step=row.step,
        seq=max(row.seq, 0),
        engine_seconds=row.engine_seconds,
        cost_micro_cents=row.cost_micro_cents,
        create_time=ts(row.create_time),
        update_time=ts(row.update_time),
    )
    json_format.ParseDict(row.adaptation, out.adaptation, ignore_unknown_fields=True)
    json_format.ParseDict(row.protect or {}, out.protect, ignore_unknown_fields=True)
    for seq, step, loss in row.losses:
        out.loss_history.add(seq=int(seq), step=int(step), loss=float(loss))
    setattr(out, "from", str(create.get("from") or ""))
    out.with_optimizer = bool(create.get("with_optimizer"))
    return out


def future_proto(session: Session, op: OperationRow) -> client_pb2.Future:
    ended = (OperationStatus.DONE, OperationStatus.FAILED, OperationStatus.QUEUED)
    status = op.status if op.status in ended else "running"
    out = client_pb2.Future(
        id=op.id,
        client_id=op.client_id,
        seq=op.seq,
        kind=op.kind,
        status=status,
        engine_seconds=op.seconds,
        create_time=ts(op.create_time),
    )
    deadline = requests.deadline_of(op.input)
    if deadline is not None:
        out.deadline_time.CopyFrom(ts(deadline))
    if op.status in OPERATION_PENDING:
        out.queue_position = store.ahead(session, op)
        recent = store.recent_seconds(session, op.client_id)
        if recent:
            # The calls up to and including this one, each as long as the recent ones.
            out.eta_seconds = round(sum(recent) / len(recent) * (out.queue_position + 1), 3)
        if op.status == OperationStatus.SENT and out.queue_position == 0:
            out.status = "running"
        elif op.status == OperationStatus.SENT:
            out.status = "queued"
    elif op.status == OperationStatus.DONE and op.kind in requests.OUTPUTS:
        json_format.ParseDict(op.output or {}, getattr(out, op.kind), ignore_unknown_fields=True)
    elif op.error:
        json_format.ParseDict(op.error, out.error, ignore_unknown_fields=True)
    return out


def error_of(future: client_pb2.Future) -> errors.DomainError:
    """A failed call's error, raised to a caller that waited for it in-line."""
    err = future.error
    if err.field and err.code == "INVALID_REQUEST":
        return errors.ValidationError(err.field, "is not valid for the client's model")
    return errors.DomainError(
        err.message or "The call failed.",
        reason=err.code or "INTERNAL_ERROR",
        code=_CODES.get(err.code, errors.FailedPrecondition.code),
    )


_CODES = {
    "DEADLINE_EXCEEDED": grpc.StatusCode.DEADLINE_EXCEEDED,
    "INVALID_REQUEST": errors.ValidationError.code,
    "CLIENT_GONE": errors.FailedPrecondition.code,
    "INTERNAL_ERROR": errors.Unavailable.code,
    "UNAVAILABLE": errors.Unavailable.code,
}
