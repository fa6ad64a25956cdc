"""Typed domain errors and their one translation into `google.rpc.Status`.

The core raises these; one interceptor turns them into a status carrying a single
`ErrorInfo` (reason, domain `trainyard.dev`, safe metadata) and, where fields are at
fault, a `BadRequest`. Messages are fixed sentences: nothing the caller sent, no path,
address or stack trace ever goes into one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from trainyard import rest
from trainyard.common.v1 import error_reason_pb2

DOMAIN = "trainyard.dev"
_PREFIX = "ERROR_REASON_"

# Every reason the API may answer, without the enum's namespace prefix.
REASONS = frozenset(
    name.removeprefix(_PREFIX)
    for name in error_reason_pb2.ErrorReason.keys()  # noqa: SIM118 (an enum wrapper)
    if name != "ERROR_REASON_UNSPECIFIED"
)


class DomainError(Exception):
    """A failure the caller may act on, with a stable reason."""

    code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT
    reason: str = "INVALID_REQUEST"
    message: str = "The request is not valid."

    def __init__(
        self,
        message: str | None = None,
        *,
        reason: str | None = None,
        code: grpc.StatusCode | None = None,
        metadata: Mapping[str, str] | None = None,
        fields: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.reason = reason or self.reason
        if self.reason not in REASONS:
            raise ValueError("unknown error reason")
        self.code = code or self.code
        self.message = message or self.message
        self.metadata = dict(metadata or {})
        self.fields = list(fields)
        super().__init__(self.message)

    def to_status(self) -> status_pb2.Status:
        info = error_details_pb2.ErrorInfo(
            reason=self.reason, domain=DOMAIN, metadata=self.metadata
        )
        details = [_pack(info)]
        if self.fields:
            bad = error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=f, description=d, reason=self.reason
                    )
                    for f, d in self.fields
                ]
            )
            details.append(_pack(bad))
        return status_pb2.Status(code=self.code.value[0], message=self.message, details=details)


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


class ValidationError(DomainError):
    """The request breaks its schema or a bound. Names the field, never its value."""

    def __init__(
        self,
        field: str,
        description: str = "is not valid",
        *,
        reason: str | None = None,
        code: grpc.StatusCode | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            f"Field {field} {description}.",
            reason=reason,
            code=code,
            metadata={"field": field, **(metadata or {})},
            fields=[(field, description)],
        )


class Unauthenticated(DomainError):
    code = grpc.StatusCode.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"
    message = "A valid API key is required."


class PermissionDenied(DomainError):
    code = grpc.StatusCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"
    message = "This credential may not call this method."


class NotFound(DomainError):
    code = grpc.StatusCode.NOT_FOUND
    reason = "NOT_FOUND"
    message = "No such resource."


class InvalidTransition(DomainError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "INVALID_TRANSITION"
    message = "The resource's state does not allow that change."


class Conflict(DomainError):
    code = grpc.StatusCode.ABORTED
    reason = "CONFLICT"
    message = "The resource changed concurrently; read it and try again."


class FailedPrecondition(DomainError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(DomainError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class AlreadyExists(DomainError):
    code = grpc.StatusCode.ALREADY_EXISTS


class Unavailable(DomainError):
    code = grpc.StatusCode.UNAVAILABLE
    reason = "UNAVAILABLE"
    message = "A dependency is unavailable; retry later."


class Unimplemented(DomainError):
    code = grpc.StatusCode.UNIMPLEMENTED
    reason = "UNIMPLEMENTED"
    message = "This method is not served yet."


def internal_status(request_id: str) -> status_pb2.Status:
    """The answer to an unexpected failure: a request id and nothing else."""
    info = error_details_pb2.ErrorInfo(
        reason="INTERNAL_ERROR", domain=DOMAIN, metadata={"request_id": request_id}
    )
    return status_pb2.Status(
        code=code_pb2.INTERNAL,
        message=f"Internal error; request id {request_id}.",
        details=[_pack(info)],
    )


def reason_of(status: status_pb2.Status) -> str | None:
    """The ErrorInfo reason of a status, for clients and tests."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return None


def rest_refusal(status: status_pb2.Status, *, retry: bool = False) -> tuple[int, str]:
    """The REST face of a refusal: its HTTP status and its body (a problem document, or the
    money wire's error), rendered once here from the same status a gRPC client reads."""
    reason, metadata, violations = rest.details(status)
    reason, fields = reason or "INTERNAL_ERROR", [field for field, _ in violations]
    http = rest.status_of(reason, retry=retry)
    body = rest.refusal(reason, status.message, status=http, fields=fields, metadata=metadata)
    return http, json.dumps(body, separators=(",", ":"), sort_keys=True)
