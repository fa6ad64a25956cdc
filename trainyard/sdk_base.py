"""What the SDK's modules share: the error every call raises, and the channel to the
gateway."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

import grpc
from grpc_status import rpc_status

from trainyard import rest


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
            code, reason or code.name, exc.details() or "", metadata,  # type: ignore[attr-defined]
            answered=bool(reason)
            or code != grpc.StatusCode.UNAVAILABLE
            or "failed to connect" not in (exc.details() or ""),  # type: ignore[attr-defined]
            violations=violations,
        )  # fmt: skip


def channel(url: str) -> grpc.Channel:
    """A channel to the gateway at `url` (`http://` or `https://`)."""
    parts = urlsplit(url)
    # HTTP/2 pings keep a long, quiet stream (an idle executor's) known to be alive, and
    # find a gateway that vanished without closing it. The gateway permits them.
    options = [
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    if parts.scheme == "https":
        return grpc.secure_channel(
            f"{parts.hostname}:{parts.port or 443}", grpc.ssl_channel_credentials(), options
        )
    return grpc.insecure_channel(f"{parts.hostname}:{parts.port or 80}", options)
