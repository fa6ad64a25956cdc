"""How a task's transfer failed: a refusal that stands, one a later try may not meet, or
a lease lost; read from the status a service answered (its ErrorInfo's reason), not from
any message text."""

from __future__ import annotations

import grpc
import httpx
from grpc_status import rpc_status

from trainyard import rest, uploads


def reason_of(exc: grpc.RpcError) -> str:
    """The refusal's reason (its ErrorInfo's), else the status code's name."""
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    reason = rest.details(status)[0] if status else ""
    return reason or exc.code().name  # type: ignore[attr-defined,no-any-return]


class TaskFailed(Exception):
    """The task cannot go on; `code` is the failure the job reports."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class LeaseLost(Exception):
    """The service says the lease is no longer the task's: stop and say nothing more."""


def classify(exc: BaseException) -> str | None:
    """None for a failure a later try may not meet (a store or gateway that does not
    answer, a grant whose signature lapsed); "" for a refusal that stands; or the failure
    code of a refusal that has its own. LEASE_LOST raises `LeaseLost`."""
    if isinstance(exc, grpc.RpcError):
        reason = reason_of(exc)
        if reason == "LEASE_LOST":
            raise LeaseLost() from exc
        if reason == "PENDING_LIMIT":
            return "artifact_pending_limit"
        transient = ("UNAVAILABLE", "CONFLICT", "INTERNAL_ERROR", "DEADLINE_EXCEEDED", "UNKNOWN")
        return None if reason in transient else ""
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return None if code >= 500 or code in (403, 408, 429) else ""
    if isinstance(exc, httpx.TransportError | uploads.Mismatch):
        return None
    return "executor_failed"
