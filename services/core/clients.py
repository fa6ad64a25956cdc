"""How one service calls another: through the gateway, as the platform role acting in the
org the work belongs to (`x-org-id`), exactly as N replicas behind Envoy would."""

from __future__ import annotations

from urllib.parse import urlsplit

import grpc

from services.core import errors
from services.core.config import Config
from trainyard.artifact.v1 import artifact_service_pb2, artifact_service_pb2_grpc

MAX_DATASET_BYTES = 512 * 1024 * 1024


def gateway_target(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 80}"


def acting_in(config: Config, org: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {config.service_key}"), ("x-org-id", org)]


class ArtifactReader:
    """Reads an org's uploaded bytes from ArtifactService (the one way JobService sees them)."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._channel = grpc.insecure_channel(
            gateway_target(config.gateway_url),
            options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)],
        )
        self._stub = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)

    def read(self, org: str, sha256: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            for part in self._stub.ReadArtifact(
                artifact_service_pb2.ReadArtifactRequest(sha256=sha256),
                metadata=acting_in(self._config, org),
                timeout=300,
            ):
                size += len(part.data)
                if size > MAX_DATASET_BYTES:
                    raise errors.ValidationError(
                        "dataset.uri", "names an object too large to train on"
                    )
                chunks.append(part.data)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:  # type: ignore[attr-defined]
                raise errors.ValidationError(
                    "dataset.uri", "names no object the org uploaded"
                ) from None
            raise errors.Unavailable() from None
        return b"".join(chunks)

    def close(self) -> None:
        self._channel.close()
