"""Refusals as the SDK reads them: a gRPC error translated to the HTTP status it backs off
or retries on, and the checks of a JSON body; never an empty body, never the request's
own text."""

from __future__ import annotations

import json
from typing import Any

import grpc
from aiohttp import web
from google.rpc import error_details_pb2, status_pb2

# gRPC code → HTTP status the SDK understands (§4 of the wire: 429 backs off, 5xx retries).
STATUS = {
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
# Refusals the SDK has a status for: money pauses it (402), a full engine backs it off (429).
BY_REASON = {
    "INSUFFICIENT_BALANCE": 402,
    "SPEND_CAP_EXCEEDED": 402,
    "BALANCE_UNAVAILABLE": 402,
    "ENGINE_FULL": 429,
    "PENDING_LIMIT": 429,
    "RATE_LIMITED": 429,
}


def problem(status: int, message: str, category: str = "user") -> web.Response:
    """A refusal the SDK shows: never an empty body, never the request's own text."""
    return web.json_response({"error": message, "category": category}, status=status)


class Refused(Exception):
    def __init__(self, status: int, message: str, category: str = "user", reason: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.category = status, message, category
        self.reason = reason


def refused_of(exc: grpc.aio.AioRpcError) -> Refused:
    code = exc.code()
    status = STATUS.get(code, 500)
    if code == grpc.StatusCode.NOT_FOUND:
        return Refused(404, "No such model, sampler, run or future in your org.")
    message = exc.details() or code.name
    reason = _reason(exc)
    status = BY_REASON.get(reason, status)
    return Refused(status, message, "user" if 400 <= status < 500 else "server", reason)


def _reason(exc: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason a service's refusal carries, if any."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""


def json_body(request_body: bytes) -> dict[str, Any]:
    try:
        body = json.loads(request_body or b"{}")
    except ValueError:
        raise Refused(400, "The body is not JSON.") from None
    if not isinstance(body, dict):
        raise Refused(400, "The body is not a JSON object.")
    return body


def int_field(body: dict[str, Any], name: str) -> int:
    value = body.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Refused(400, f"`{name}` must be an integer.")
    return value


def str_field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise Refused(400, f"`{name}` must be a non-empty string.")
    return value
