"""What the SDK's modules share: the error every call raises, the channel to the gateway
(`trainyard.channels`, which executors use too), and the one call its method groups make."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from grpc_status import rpc_status

from trainyard import rest
from trainyard.channels import channel

__all__ = ["Calls", "TrainyardError", "channel"]


class Calls:
    """What each group of `trainyard.sdk.Client`'s methods stands on: `Client._call`, which
    sends one request to the service that has `method`."""

    def _call(
        self,
        method: str,
        request: Any,
        *,
        timeout: float | None = None,
        org: str | None = None,
        **md: str,
    ) -> Any:
        raise NotImplementedError


class TrainyardError(Exception):
    """An error answered by Trainyard: branch on `reason`, never on the message."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        metadata: Mapping[str, str],
        *,
        answered: bool = True,
        violations: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = dict(metadata)
        # False when no Trainyard service answered (the gateway could not be reached).
        self.answered = answered
        # The fields at fault and what is wrong with each (the status's BadRequest).
        self.violations = list(violations)

    @classmethod
    def from_rpc(cls, exc: grpc.RpcError) -> TrainyardError:
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]
        reason, metadata, violations = rest.details(status) if status else ("", {}, [])
        code = exc.code()  # type: ignore[attr-defined]
        return cls(
            code,
            reason or code.name,
            exc.details() or "",
            metadata,  # type: ignore[attr-defined]
            answered=bool(reason)
            or code != grpc.StatusCode.UNAVAILABLE
            or "failed to connect" not in (exc.details() or ""),  # type: ignore[attr-defined]
            violations=violations,
        )
