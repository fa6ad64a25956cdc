"""How one service calls another: through the gateway, as the platform role acting in the
org the work belongs to (`x-org-id`), exactly as N replicas behind Envoy would."""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Iterator
from typing import IO, Any
from urllib.parse import urlsplit

import grpc
import httpx

from services.core import errors
from services.core.config import Config
from services.core.datasets import MAX_DATASET_BYTES
from trainyard import uploads
from trainyard.artifact.v1 import (
    artifact_pb2,
    artifact_service_pb2,
    artifact_service_pb2_grpc,
    provenance_pb2,
)


def gateway_target(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 80}"


def _mismatch() -> errors.DomainError:
    return errors.DomainError(
        "The stored object does not match its sha256 and was not read.",
        reason="ARTIFACT_MISMATCH",
        code=grpc.StatusCode.DATA_LOSS,
    )


class _ChunkFile(io.RawIOBase):
    """A file over an iterator of byte strings (a gRPC stream), holding one chunk at a
    time. Written by hand: the standard library reads files, not iterators."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._left:
            self._left = memoryview(next((c for c in self._chunks if c), b""))
        n = min(len(buffer), len(self._left))
        buffer[:n], self._left = self._left[:n], self._left[n:]
        return n


def acting_in(config: Config, org: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {config.service_key}"), ("x-org-id", org)]


class ArtifactReader:
    """JobService's calls to ArtifactService: it reads an org's uploaded rows, keeps a
    job's dataset snapshot as an object the job holds, and has published objects'
    download URLs signed."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._channel = grpc.insecure_channel(
            gateway_target(config.gateway_url),
            options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)],
        )
        self._stub = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)
        self._whole_reads = threading.BoundedSemaphore(2)

    def read(self, org: str, sha256: str) -> bytes:
        """The object whole (a dataset: its rows are parsed at once). Two at a time, so a
        burst of creates and estimates does not hold many datasets in memory together."""
        with self._whole_reads:
            return b"".join(self._chunks(org, sha256))

    def open(self, org: str, sha256: str) -> IO[bytes]:
        """The object as a file read as it streams, never held whole; its sha256 is
        checked when it is read to its end, so a reader trusts nothing before then."""
        return io.BufferedReader(_ChunkFile(self._chunks(org, sha256)))

    def _chunks(self, org: str, sha256: str) -> Iterator[bytes]:
        digest, size = hashlib.sha256(), 0
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
                digest.update(part.data)
                yield part.data
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:  # type: ignore[attr-defined]
                raise errors.ValidationError(
                    "dataset.uri", "names no object the org uploaded"
                ) from None
            if exc.code() == grpc.StatusCode.DATA_LOSS:  # type: ignore[attr-defined]
                raise _mismatch() from None
            raise errors.Unavailable() from None
        # Checked again here, where the bytes are used: what ArtifactService streamed is
        # what its name promises, or nothing is read from it.
        if digest.hexdigest() != sha256:
            raise _mismatch()

    def keep(self, org: str, job_id: str, sha256: str, data: bytes) -> None:
        """Store bytes a job made (its dataset snapshot) the way an executor stores an
        output: granted, put, read back. A store that cannot be reached is UNAVAILABLE."""
        metadata = acting_in(self._config, org)
        try:
            grant = self._stub.GrantJobArtifact(
                artifact_service_pb2.GrantJobArtifactRequest(
                    job_id=job_id, kind="snapshot", name="snapshot", sha256=sha256, size=len(data)
                ),
                metadata=metadata,
                timeout=60,
            )
            if grant.stored:
                return  # the org holds these bytes: the grant named them the job's
            with httpx.Client(timeout=uploads.TIMEOUT) as http:
                uploads.put(http, grant, io.BytesIO(data))
            self._stub.ConfirmJobArtifact(
                artifact_service_pb2.ConfirmJobArtifactRequest(job_id=job_id, sha256=sha256),
                metadata=metadata,
                timeout=300,
            )
        except grpc.RpcError as exc:
            raise _domain_error(exc) from None
        except httpx.HTTPError:
            raise errors.Unavailable() from None

    def describe(self, org: str, sha256: str) -> artifact_pb2.Artifact:
        """One of the org's objects with a download URL valid 10 minutes and the headers
        a GET of it needs. Any refusal, even NOT_FOUND, is UNAVAILABLE: the caller needs
        the object, and reading it as absent would drop it from an answer."""
        try:
            answer: artifact_pb2.Artifact = self._stub.GetArtifact(
                artifact_service_pb2.GetArtifactRequest(sha256=sha256),
                metadata=acting_in(self._config, org),
                timeout=60,
            )
        except grpc.RpcError:
            raise errors.Unavailable() from None
        return answer

    def close(self) -> None:
        self._channel.close()


class ArtifactClient:
    """ClaimService's calls to ArtifactService: an executor's grants, confirmations and
    the provenance of a finished run, acting in the job's org."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._channel = grpc.insecure_channel(gateway_target(config.gateway_url))
        self._stub = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)

    def _call(self, method: str, request: object, org: str) -> object:
        try:
            return getattr(self._stub, method)(
                request, metadata=acting_in(self._config, org), timeout=600
            )
        except grpc.RpcError as exc:
            raise _domain_error(exc) from None

    def grant(
        self, org: str, request: artifact_service_pb2.GrantJobArtifactRequest
    ) -> artifact_pb2.Grant:
        return self._call("GrantJobArtifact", request, org)  # type: ignore[return-value]

    def confirm(self, org: str, job_id: str, sha256: str) -> artifact_pb2.Artifact:
        request = artifact_service_pb2.ConfirmJobArtifactRequest(job_id=job_id, sha256=sha256)
        return self._call("ConfirmJobArtifact", request, org)  # type: ignore[return-value]

    def open(self, org: str, sha256: str) -> IO[bytes]:
        """One of the org's objects (an adapter a client starts from) as a file read as it
        streams; its sha256 is checked at its end. An object the org does not hold is a
        ValidationError on `from`, never naming it."""
        return io.BufferedReader(_ChunkFile(self._chunks(org, sha256)))

    def _chunks(self, org: str, sha256: str) -> Iterator[bytes]:
        digest = hashlib.sha256()
        try:
            for part in self._stub.ReadArtifact(
                artifact_service_pb2.ReadArtifactRequest(sha256=sha256),
                metadata=acting_in(self._config, org),
                timeout=300,
            ):
                digest.update(part.data)
                yield part.data
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:  # type: ignore[attr-defined]
                raise errors.ValidationError("from", "names no stored object of the org") from None
            if exc.code() == grpc.StatusCode.DATA_LOSS:  # type: ignore[attr-defined]
                raise _mismatch() from None
            raise errors.Unavailable() from None
        if digest.hexdigest() != sha256:
            raise _mismatch()

    def read(self, org: str, sha256: str) -> bytes:
        return b"".join(self._chunks(org, sha256))

    def describe(self, org: str, sha256: str) -> artifact_pb2.Artifact:
        """One of the org's objects with a short-lived download URL."""
        request = artifact_service_pb2.GetArtifactRequest(sha256=sha256)
        return self._call("GetArtifact", request, org)  # type: ignore[return-value]

    def record_provenance(
        self, org: str, record: provenance_pb2.ProvenanceRecord
    ) -> provenance_pb2.ProvenanceRecord:
        request = artifact_service_pb2.RecordProvenanceRequest(record=record)
        return self._call("RecordProvenance", request, org)  # type: ignore[return-value]

    def close(self) -> None:
        self._channel.close()


def _domain_error(exc: grpc.RpcError) -> errors.DomainError:
    """Carry another service's stable reason through; anything else is UNAVAILABLE."""
    from grpc_status import rpc_status

    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    found = errors.reason_of(status) if status else None
    if found and found not in ("INTERNAL_ERROR", "UNAUTHENTICATED", "PERMISSION_DENIED"):
        return errors.DomainError(
            exc.details() or "",  # type: ignore[attr-defined]
            reason=found,
            code=exc.code(),  # type: ignore[attr-defined]
        )
    return errors.Unavailable()
