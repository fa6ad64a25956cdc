"""The Python SDK: Trainyard's API over the generated gRPC stubs, through the gateway.

from trainyard.sdk import Client
client = Client()                      # TRAINYARD_URL, TRAINYARD_API_KEY
job = client.create_job({"base_model": "fixture-tiny-llm",
                         "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                         "resources": {"budget": 100}})  # US cents
for update in client.watch_job(job.id):
    ...

An interactive training client (Tinker's loop; creating one takes an operator key):

trainer = client.create_training_client("fixture-tiny-llm", rank=8, org="demo")
fb = trainer.forward_backward([datum_from_text("the quick brown fox")])
step = trainer.optim_step({"learning_rate": 1e-2})  # pipelined: both are on their way
print(fb.result().loss, step.result().step)
print(trainer.sample("the quick", sampling_params={"temperature": 0}).result())
trainer.delete()
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from trainyard.artifact.v1 import artifact_service_pb2_grpc
from trainyard.channels import Tls, channel
from trainyard.client.v1 import client_pb2, client_service_pb2, client_service_pb2_grpc
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
from trainyard.org.v1 import org_service_pb2_grpc
from trainyard.sdk_artifacts import ArtifactMethods, file_sha256
from trainyard.sdk_base import TrainyardError
from trainyard.sdk_clients import (
    MAX_WAIT,
    RPC_MARGIN,
    APIFuture,
    TrainingClient,
    check_live,
    datum_from_text,
    datum_from_tokens,
    to_datum,
    to_model_input,
)
from trainyard.sdk_compare import CompareMethods, Comparison, Run
from trainyard.sdk_org import OrgMethods
from trainyard.sdk_webhooks import WebhookMethods
from trainyard.webhook.v1 import webhook_service_pb2_grpc

__all__ = [
    "APIFuture", "Client", "Comparison", "Run", "TrainingClient", "TrainyardError",
    "datum_from_text", "datum_from_tokens", "file_sha256", "to_datum", "to_model_input",
]  # fmt: skip

DEFAULT_URL = "http://127.0.0.1:8080"
# An attempt log is read this many bytes at a time, and followed by long polls this long.
LOG_READ_BYTES = 1024 * 1024
LOG_WAIT_SECONDS = 25


class Client(ArtifactMethods, CompareMethods, OrgMethods, WebhookMethods):
    """A connection to one Trainyard gateway, acting with one API key. Its artifact calls
    (upload, download, ...) are written in `trainyard.sdk_artifacts`, its comparison of
    jobs (`compare_jobs`) in `trainyard.sdk_compare`, its calls on the org (keys, the
    audit trail, limits) in `trainyard.sdk_org`, its webhook calls in
    `trainyard.sdk_webhooks`."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        org: str | None = None,
        tls: Tls | None = None,
    ) -> None:
        """`org`: the org an operator or platform key acts in (`x-org-id`) on every call;
        the key's own org when unset. `tls`: how an `https://` gateway is verified (the
        system's CAs, or `TRAINYARD_CA_FILE`'s) and the client certificate, if any."""
        self.url = url or os.environ.get("TRAINYARD_URL") or DEFAULT_URL
        self._key = api_key or os.environ.get("TRAINYARD_API_KEY", "")
        self._org = org or ""
        self._timeout = timeout
        self.tls = tls or Tls.from_env()
        self._channel = channel(self.url, self.tls)
        self.jobs = job_service_pb2_grpc.JobServiceStub(self._channel)
        self.artifacts = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)
        self.meter = meter_service_pb2_grpc.MeterServiceStub(self._channel)
        self.clients = client_service_pb2_grpc.ClientServiceStub(self._channel)
        self.hooks = webhook_service_pb2_grpc.WebhookServiceStub(self._channel)
        self.orgs = org_service_pb2_grpc.OrgServiceStub(self._channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _md(self, **extra: str) -> list[tuple[str, str]]:
        org = {"x-org-id": self._org} if self._org else {}
        return [("authorization", f"Bearer {self._key}"), *{**org, **extra}.items()]

    def _call(
        self,
        method: str,
        request: Any,
        *,
        timeout: float | None = None,
        org: str | None = None,
        **md: str,
    ) -> Any:
        stubs = (self.artifacts, self.meter, self.clients, self.hooks, self.orgs)
        stub = next((s for s in stubs if hasattr(s, method)), self.jobs)
        if org:
            md["x-org-id"] = org
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

    def metrics(
        self, job_id: str, *names: str, max_points: int = 0
    ) -> list[event_pb2.MetricSeries]:
        """The job's series (`names`, or all); `max_points` cuts each to that many points
        keeping its shape and spikes."""
        request = job_service_pb2.ListJobMetricsRequest(
            id=job_id, names=names, max_points=max_points
        )
        return list(self._call("ListJobMetrics", request).series)

    def dataset_items(
        self, job_id: str, *, offset: int = 0, limit: int = 0, search: str = "", split: str = ""
    ) -> job_service_pb2.ListJobDatasetItemsResponse:
        """A page of the examples the job trained on, each with its first messages (cut);
        `dataset_item` reads one whole."""
        request = job_service_pb2.ListJobDatasetItemsRequest(
            id=job_id, offset=offset, limit=limit, search=search, split=split
        )
        return self._call("ListJobDatasetItems", request)

    def dataset_item(self, job_id: str, item_id: str) -> job_pb2.DatasetItem:
        """One example the job trained on, with its messages exactly as the job used them."""
        return self._call(
            "GetJobDatasetItem", job_service_pb2.GetJobDatasetItemRequest(id=job_id, item=item_id)
        )

    def attempts(self, job_id: str) -> list[attempt_pb2.Attempt]:
        return list(
            self._call(
                "ListJobAttempts", job_service_pb2.ListJobAttemptsRequest(id=job_id)
            ).attempts
        )

    def attempt_log(
        self,
        job_id: str,
        attempt: int | str,
        *,
        tail_lines: int = 0,
        offset: int | None = None,
        limit_bytes: int = 0,
        start_line: int | None = None,
        max_lines: int = 0,
        wait: int = 0,
    ) -> job_service_pb2.AttemptLog:
        """A part of an attempt's log (its trainer's stdout and stderr): the last
        `tail_lines` (100 by default), bytes from `offset`, or lines from `start_line`;
        `wait` holds the answer up to that many seconds for text past `offset`."""
        request = job_service_pb2.GetAttemptLogRequest(
            id=job_id,
            attempt=str(attempt),
            tail_lines=tail_lines,
            limit_bytes=limit_bytes,
            max_lines=max_lines,
            wait=wait,
        )
        if offset is not None:
            request.offset = offset
        if start_line is not None:
            request.start_line = start_line
        return self._call("GetAttemptLog", request, timeout=wait + 30)

    def log_text(
        self, job_id: str, attempt: int | str, *, tail_lines: int = 0, follow: bool = False
    ) -> Iterator[str]:
        """An attempt's log as it is read: whole (or its last `tail_lines`), then, with
        `follow`, what it gains until the attempt ends."""
        if tail_lines:
            part = self.attempt_log(job_id, attempt, tail_lines=tail_lines)
        else:
            part = self.attempt_log(job_id, attempt, offset=0, limit_bytes=LOG_READ_BYTES)
        yield part.text
        while part.next_offset < part.size or (follow and not part.complete):
            part = self.attempt_log(
                job_id,
                attempt,
                offset=part.next_offset,
                limit_bytes=LOG_READ_BYTES,
                wait=LOG_WAIT_SECONDS if follow else 0,
            )
            yield part.text

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

    # -- training clients ------------------------------------------------------------------

    def create_training_client(
        self,
        base_model: str,
        *,
        rank: int | None = None,
        alpha: int | None = None,
        targets: Sequence[str] = (),
        seed: int | None = None,
        org: str | None = None,
        wait: int = 120,
        from_: str = "",
        with_optimizer: bool = False,
    ) -> TrainingClient:
        """Create an interactive training client (operator keys; `org` is the org it is for,
        sent as `x-org-id`) and wait up to `wait` seconds for an engine to load it. Raises
        `CLIENT_GONE` when the engine could not; a client still `placing` after `wait` is
        answered as it is (its calls queue until it loads). `from_` (a saved adapter's or
        state's sha256) starts it from those weights; `with_optimizer` restores the saved
        state's optimizer too, so training continues as if uninterrupted."""
        lora = client_pb2.LoraConfig(targets=list(targets))
        if rank is not None:
            lora.rank = rank
        if alpha is not None:
            lora.alpha = alpha
        if seed is not None:
            lora.seed = seed
        request = client_service_pb2.CreateTrainingClientRequest(
            base_model=base_model, wait=max(0, min(wait, MAX_WAIT)), with_optimizer=with_optimizer
        )
        setattr(request, "from", from_)
        if rank is not None or alpha is not None or targets or seed is not None:
            request.lora_config.CopyFrom(lora)
        started = time.monotonic()
        made = self._call(
            "CreateTrainingClient", request, timeout=request.wait + RPC_MARGIN, org=org
        )
        while made.status == "placing" and time.monotonic() - started < wait:
            time.sleep(1.0)
            made = self._call(
                "GetTrainingClient",
                client_service_pb2.GetTrainingClientRequest(id=made.id),
                org=org,
            )
        check_live(made)
        return TrainingClient(self, made, org=org or "")

    def training_client(self, client_id: str, *, org: str | None = None) -> TrainingClient:
        """Attach to an existing client: its calls continue from the client's `seq`."""
        found = self._call(
            "GetTrainingClient", client_service_pb2.GetTrainingClientRequest(id=client_id), org=org
        )
        return TrainingClient(self, found, org=org or "")

    def list_training_clients(
        self, *, status: str = "", org: str | None = None
    ) -> Iterator[client_pb2.TrainingClient]:
        """The org's training clients, newest first, page after page."""
        token = ""
        while True:
            page = self._call(
                "ListTrainingClients",
                client_service_pb2.ListTrainingClientsRequest(status=status, page_token=token),
                org=org,
            )
            yield from page.clients
            if not (token := page.next_page_token):
                return
