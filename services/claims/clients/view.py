"""How training clients and their calls read: the rows as the API answers them, and a
failed call's error as a caller waiting in-line meets it."""

from __future__ import annotations

from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.claims.clients import requests, store
from services.core import errors
from services.core.tables import ClientRow, OperationRow
from services.core.view import ts
from trainyard.client.v1 import client_pb2


def client_proto(row: ClientRow) -> client_pb2.TrainingClient:
    out = client_pb2.TrainingClient(
        id=row.id, base_model=row.base_model, status=row.status, reason=row.reason,
        message=row.message, step=row.step, seq=max(row.seq, 0),
        engine_seconds=row.engine_seconds, cost_micro_cents=row.cost_micro_cents,
        create_time=ts(row.create_time), update_time=ts(row.update_time),
    )  # fmt: skip
    json_format.ParseDict(row.adaptation, out.adaptation, ignore_unknown_fields=True)
    json_format.ParseDict(row.protect or {}, out.protect, ignore_unknown_fields=True)
    for seq, step, loss in row.losses:
        out.loss_history.add(seq=int(seq), step=int(step), loss=float(loss))
    return out


def future_proto(session: Session, op: OperationRow) -> client_pb2.Future:
    status = op.status if op.status in ("done", "failed", "queued") else "running"
    out = client_pb2.Future(
        id=op.id, client_id=op.client_id, seq=op.seq, kind=op.kind, status=status,
        engine_seconds=op.seconds, create_time=ts(op.create_time),
    )  # fmt: skip
    if op.status in store.PENDING:
        out.queue_position = store.ahead(session, op)
        if op.status == "sent" and out.queue_position == 0:
            out.status = "running"
        elif op.status == "sent":
            out.status = "queued"
    elif op.status == "done" and op.kind in requests.OUTPUTS:
        json_format.ParseDict(op.output or {}, getattr(out, op.kind), ignore_unknown_fields=True)
    elif op.error:
        json_format.ParseDict(op.error, out.error, ignore_unknown_fields=True)
    return out


def error_of(future: client_pb2.Future) -> errors.DomainError:
    """A failed call's error, raised to a caller that waited for it in-line."""
    err = future.error
    if err.field and err.code == "VALIDATION_ERROR":
        return errors.ValidationError(err.field, "is not valid for the client's model")
    return errors.DomainError(
        err.message or "The call failed.",
        reason=err.code or "INTERNAL_ERROR",
        code=_CODES.get(err.code, errors.FailedPrecondition.code),
    )


_CODES = {
    "VALIDATION_ERROR": errors.ValidationError.code,
    "CLIENT_GONE": errors.FailedPrecondition.code,
    "INTERNAL_ERROR": errors.Unavailable.code,
    "UNAVAILABLE": errors.Unavailable.code,
}
