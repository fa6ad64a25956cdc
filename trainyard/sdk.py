"""The Python SDK: Trainyard's API over the generated gRPC stubs, through the gateway.

from trainyard.sdk import Client
client = Client()                      # TRAINYARD_URL, TRAINYARD_API_KEY
job = client.create_job({"base_model": "fixture-tiny-llm",
                         "dataset": {"uri": "fixture:synthetic-tiny-v1"}})
for update in client.watch_job(job.id):
    ...
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import grpc
from google.protobuf import struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from trainyard.job.v1 import (
    attempt_pb2,
    event_pb2,
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    model_pb2,
)

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
    if parts.scheme == "https":
        return grpc.secure_channel(
            f"{parts.hostname}:{parts.port or 443}", grpc.ssl_channel_credentials()
        )
    return grpc.insecure_channel(f"{parts.hostname}:{parts.port or 80}")


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

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _md(self, **extra: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self._key}"), *extra.items()]

    def _call(self, method: str, request: Any, *, timeout: float | None = None, **md: str) -> Any:
        try:
            return getattr(self.jobs, method)(
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

    def models(self) -> list[model_pb2.BaseModel]:
        return list(self._call("ListModels", job_service_pb2.ListModelsRequest()).models)
