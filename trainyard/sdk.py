"""The Python SDK: Trainyard's API over the generated gRPC stubs, through the gateway.

from trainyard.sdk import Client
client = Client()                      # TRAINYARD_URL, TRAINYARD_API_KEY
job = client.create_job({"base_model": "fixture-tiny-llm",
                         "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                         "resources": {"budget": 100}})  # US cents
for update in client.watch_job(job.id):
    ...
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import httpx
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from trainyard.artifact.v1 import (
    artifact_pb2,
    artifact_service_pb2,
    artifact_service_pb2_grpc,
    provenance_pb2,
)
from trainyard.job.v1 import (
    attempt_pb2,
    event_pb2,
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    model_pb2,
    publication_pb2,
)
from trainyard.meter.v1 import meter_pb2, meter_service_pb2, meter_service_pb2_grpc

DEFAULT_URL = "http://127.0.0.1:8080"


class TrainyardError(Exception):
    """An error answered by Trainyard: branch on `reason`, never on the message."""

    def __init__(
        self, code: grpc.StatusCode, reason: str, message: str, metadata: Mapping[str, str]
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = dict(metadata)

    @classmethod
    def from_rpc(cls, exc: grpc.RpcError) -> TrainyardError:
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]
        reason, metadata = "", {}
        for detail in status.details if status else ():
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason, metadata = info.reason, dict(info.metadata)
        code = exc.code()  # type: ignore[attr-defined]
        return cls(code, reason or code.name, exc.details() or "", metadata)  # type: ignore[attr-defined]


def _channel(url: str) -> grpc.Channel:
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


class Client:
    """A connection to one Trainyard gateway, acting with one API key."""

    def __init__(
        self, url: str | None = None, api_key: str | None = None, timeout: float = 60.0
    ) -> None:
        self.url = url or os.environ.get("TRAINYARD_URL") or DEFAULT_URL
        self._key = api_key or os.environ.get("TRAINYARD_API_KEY", "")
        self._timeout = timeout
        self._channel = _channel(self.url)
        self.jobs = job_service_pb2_grpc.JobServiceStub(self._channel)
        self.artifacts = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)
        self.meter = meter_service_pb2_grpc.MeterServiceStub(self._channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _md(self, **extra: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self._key}"), *extra.items()]

    def _call(self, method: str, request: Any, *, timeout: float | None = None, **md: str) -> Any:
        stub = next((s for s in (self.artifacts, self.meter) if hasattr(s, method)), self.jobs)
        try:
            return getattr(stub, method)(
                request, metadata=self._md(**md), timeout=timeout or self._timeout
            )
        except grpc.RpcError as exc:
            raise TrainyardError.from_rpc(exc) from None

    # -- jobs ------------------------------------------------------------------------------

    def create_job(self, spec: Mapping[str, Any] | job_pb2.Job) -> job_pb2.Job:
        """Create a job from a dict (sent as JSON, checked strictly by the service) or a Job."""
        if isinstance(spec, job_pb2.Job):
            return self._call("CreateJob", job_service_pb2.CreateJobRequest(job=spec))
        body = struct_pb2.Struct()
        body.update(dict(spec))
        return self._call("CreateJob", job_service_pb2.CreateJobRequest(body=body))

    def estimate_job(self, spec: Mapping[str, Any]) -> job_service_pb2.EstimateJobResponse:
        body = struct_pb2.Struct()
        body.update(dict(spec))
        return self._call("EstimateJob", job_service_pb2.EstimateJobRequest(body=body))

    def get_job(self, job_id: str, *, by_number: bool = False, project: str = "") -> job_pb2.Job:
        request = job_service_pb2.GetJobRequest(
            id=job_id, identifier="number" if by_number else "", project=project
        )
        return self._call("GetJob", request)

    def list_jobs(
        self, *, status: str = "", project: str = "", page_size: int = 0
    ) -> Iterator[job_pb2.Job]:
        """Every matching job, newest first, fetched page by page."""
        token = ""
        while True:
            page = self._call(
                "ListJobs",
                job_service_pb2.ListJobsRequest(
                    status=status, project=project, page_size=page_size, page_token=token
                ),
            )
            yield from page.jobs
            token = page.next_page_token
            if not token:
                return

    def cancel_job(self, job_id: str) -> job_pb2.Job:
        return self._call("CancelJob", job_service_pb2.CancelJobRequest(id=job_id))

    def retry_job(
        self,
        job_id: str,
        *,
        idempotency_key: str | None = None,
        resume_from_checkpoint: bool = False,
    ) -> job_service_pb2.RetryJobResponse:
        request = job_service_pb2.RetryJobRequest(
            id=job_id,
            idempotency_key=idempotency_key or str(uuid.uuid4()),
            resume_from_checkpoint=resume_from_checkpoint,
        )
        return self._call("RetryJob", request)

    def events(
        self, job_id: str, *, after: int = 0, wait: int = 0
    ) -> job_service_pb2.ListJobEventsResponse:
        return self._call(
            "ListJobEvents",
            job_service_pb2.ListJobEventsRequest(id=job_id, after=after, wait=wait),
            timeout=wait + 30,
        )

    def watch_job(
        self, job_id: str, *, after: int = 0
    ) -> Iterator[job_service_pb2.WatchJobResponse]:
        """The job, then each event and change, until the job ends."""
        try:
            yield from self.jobs.WatchJob(
                job_service_pb2.WatchJobRequest(id=job_id, after=after), metadata=self._md()
            )
        except grpc.RpcError as exc:
            raise TrainyardError.from_rpc(exc) from None

    def metrics(self, job_id: str, *names: str) -> list[event_pb2.MetricSeries]:
        return list(
            self._call(
                "ListJobMetrics", job_service_pb2.ListJobMetricsRequest(id=job_id, names=names)
            ).series
        )

    def attempts(self, job_id: str) -> list[attempt_pb2.Attempt]:
        return list(
            self._call(
                "ListJobAttempts", job_service_pb2.ListJobAttemptsRequest(id=job_id)
            ).attempts
        )

    def publish_job(
        self,
        job_id: str,
        *,
        name: str = "",
        force: bool = False,
        route: Mapping[str, Any] | publication_pb2.Route | None = None,
    ) -> publication_pb2.Publication:
        """Publish a succeeded job's output under `name` (the output's name when empty); a
        rejected job's needs `force`. A capability needs its `route`
        (`{"keys": [...], "options": {key: {"type", "labels"}}}`); nothing else takes one."""
        request = job_service_pb2.PublishJobRequest(id=job_id, name=name, force=force)
        if isinstance(route, publication_pb2.Route):
            request.route.CopyFrom(route)
        elif route is not None:
            json_format.ParseDict(dict(route), request.route)
        return self._call("PublishJob", request)

    def published(self, *, revision: str = "") -> job_service_pb2.ListPublishedResponse:
        """Every org's published capabilities (the platform's key): `changed` false and no
        data while `revision` is the current one, else each with a download URL."""
        return self._call("ListPublished", job_service_pb2.ListPublishedRequest(revision=revision))

    def models(self) -> list[model_pb2.BaseModel]:
        return list(self._call("ListModels", job_service_pb2.ListModelsRequest()).models)

    # -- artifacts -------------------------------------------------------------------------

    def upload(
        self,
        path: Path,
        *,
        name: str | None = None,
        kind: str = "dataset",
        progress: Callable[[int, int], None] | None = None,
    ) -> artifact_pb2.Artifact:
        """Hash a file, ask for a grant, PUT the bytes (unless the org holds them already),
        and have the service read them back and verify them."""
        sha256, size = file_sha256(path)
        grant = self._call(
            "CreateArtifact",
            artifact_service_pb2.CreateArtifactRequest(
                kind=kind, name=name or _safe_name(path), sha256=sha256, size=size
            ),
        )
        if not grant.stored:
            transfers = (
                [(0, size, grant.upload.url, dict(grant.upload.headers))]
                if grant.HasField("upload")
                else [(p.offset, p.size, p.url, dict(p.headers)) for p in grant.parts]
            )
            sent = 0
            with httpx.Client(timeout=httpx.Timeout(60.0, read=600.0)) as http:
                for offset, length, url, headers in transfers:

                    def body(offset: int = offset, length: int = length) -> Iterator[bytes]:
                        nonlocal sent
                        with path.open("rb") as fh:
                            fh.seek(offset)
                            left = length
                            while left:
                                chunk = fh.read(min(1 << 20, left))
                                left -= len(chunk)
                                sent += len(chunk)
                                if progress:
                                    progress(sent, size)
                                yield chunk

                    answer = http.put(url, content=body(), headers=headers)
                    if answer.status_code >= 300:
                        raise TrainyardError(
                            grpc.StatusCode.FAILED_PRECONDITION,
                            "UPLOAD_REFUSED",
                            f"The object store refused the upload ({answer.status_code}).",
                            {},
                        )
        elif progress:
            progress(size, size)
        return self._call(
            "ConfirmArtifact",
            artifact_service_pb2.ConfirmArtifactRequest(sha256=sha256),
            timeout=600,
        )

    def get_artifact(self, sha256: str) -> artifact_pb2.Artifact:
        return self._call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=sha256))

    def list_artifacts(self, *, kind: str = "") -> Iterator[artifact_pb2.Artifact]:
        token = ""
        while True:
            page = self._call(
                "ListArtifacts",
                artifact_service_pb2.ListArtifactsRequest(kind=kind, page_token=token),
            )
            yield from page.artifacts
            token = page.next_page_token
            if not token:
                return

    def download(
        self, sha256: str, target: Path, *, progress: Callable[[int, int], None] | None = None
    ) -> Path:
        """Download an object and verify its sha256 before it lands at `target`."""
        artifact = self.get_artifact(sha256)
        partial = target.with_name(target.name + ".partial")
        digest, got = hashlib.sha256(), 0
        with httpx.stream(
            "GET", artifact.url, headers=dict(artifact.headers), timeout=600
        ) as answer:
            answer.raise_for_status()
            with partial.open("wb") as fh:
                for chunk in answer.iter_bytes(1 << 20):
                    fh.write(chunk)
                    digest.update(chunk)
                    got += len(chunk)
                    if progress:
                        progress(got, int(artifact.size))
        if digest.hexdigest() != sha256:
            partial.unlink(missing_ok=True)
            raise TrainyardError(
                grpc.StatusCode.DATA_LOSS, "ARTIFACT_MISMATCH", "The download did not verify.", {}
            )
        partial.replace(target)
        return target

    def delete_artifact(self, sha256: str) -> bool:
        return bool(
            self._call(
                "DeleteArtifact", artifact_service_pb2.DeleteArtifactRequest(sha256=sha256)
            ).deleted
        )

    def job_artifacts(self, job_id: str) -> list[artifact_pb2.Artifact]:
        return list(
            self._call(
                "ListJobArtifacts", artifact_service_pb2.ListJobArtifactsRequest(id=job_id)
            ).artifacts
        )

    def provenance(self, job_id: str) -> provenance_pb2.ProvenanceRecord:
        return self._call(
            "GetJobProvenance", artifact_service_pb2.GetJobProvenanceRequest(id=job_id)
        )

    # -- money -----------------------------------------------------------------------------

    def wallet(self) -> meter_pb2.Wallet:
        """The org's wallet: balance, live holds, this month's spend and caps (micro-cents)."""
        return self._call("GetWallet", meter_service_pb2.GetWalletRequest())

    def ledger(self) -> Iterator[meter_pb2.LedgerEntry]:
        """The org's ledger entries, newest first, page after page."""
        token = ""
        while True:
            page = self._call(
                "ListLedgerEntries", meter_service_pb2.ListLedgerEntriesRequest(page_token=token)
            )
            yield from page.entries
            if not (token := page.next_page_token):
                return

    def rates(self) -> list[meter_pb2.Rate]:
        return list(self._call("ListRates", meter_service_pb2.ListRatesRequest()).rates)

    def credit(self, payer: str, micro_cents: int, name: str) -> meter_pb2.Wallet:
        """Credit an org's wallet (operator keys); the same name again is one credit."""
        request = meter_service_pb2.CreditWalletRequest(
            payer=payer, micro_cents=micro_cents, name=name
        )
        return self._call("CreditWallet", request)


def file_sha256(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _safe_name(path: Path) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in path.name).lstrip(".-_")
    return cleaned[:128] or "upload"
