"""A training client's operation: pushed to its engine, then answered done or failed
(by the engine, or because its client ended). Each move is a no-op when repeated."""

from __future__ import annotations

import datetime as dt
from typing import Any

from services.core import errors
from services.core.states import OPERATION_MOVES, OperationStatus, check_move
from services.core.tables import OperationRow

Op = OperationStatus


def operation_sent(op: OperationRow) -> bool:
    """Pushed on its executor's stream (a new stream sends again what is not answered)."""
    if not check_move(OPERATION_MOVES, op.status, Op.SENT):
        return False
    op.status = Op.SENT
    return True


def operation_done(op: OperationRow, output: dict[str, Any], now: dt.datetime) -> bool:
    if not check_move(OPERATION_MOVES, op.status, Op.DONE):
        return False
    op.status, op.output, op.done_time = Op.DONE, output, now
    return True


def operation_failed(
    op: OperationRow, code: str, message: str, now: dt.datetime, field: str = ""
) -> bool:
    """Failed with a stable reason (INTERNAL_ERROR for one the contract does not know)."""
    if not check_move(OPERATION_MOVES, op.status, Op.FAILED):
        return False
    code = code if code in errors.REASONS else "INTERNAL_ERROR"
    op.status, op.done_time = Op.FAILED, now
    op.error = {"code": code, "message": message[:256], "field": field[:128]}
    return True
