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

import hashlib
import os
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.protobuf import json_format, struct_pb2

from trainyard import packing
from trainyard.artifact.v1 import (
    artifact_pb2,
    artifact_service_pb2,
    artifact_service_pb2_grpc,
    provenance_pb2,
)
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
from trainyard.sdk_base import TrainyardError, channel
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

__all__ = [
    "APIFuture", "Client", "TrainingClient", "TrainyardError", "datum_from_text",
    "datum_from_tokens", "file_sha256", "to_datum", "to_model_input",
]  # fmt: skip

DEFAULT_URL = "http://127.0.0.1:8080"


class Client:
    """A connection to one Trainyard gateway, acting with one API key."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        *,
        org: str | None = None,
    ) -> None:
        """`org`: the org an operator or platform key acts in (`x-org-id`) on every call;
        the key's own org when unset."""
        self.url = url or os.environ.get("TRAINYARD_URL") or DEFAULT_URL
        self._key = api_key or os.environ.get("TRAINYARD_API_KEY", "")
        self._org = org or ""
        self._timeout = timeout
        self._channel = channel(self.url)
        self.jobs = job_service_pb2_grpc.JobServiceStub(self._channel)
        self.artifacts = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)
        self.meter = meter_service_pb2_grpc.MeterServiceStub(self._channel)
        self.clients = client_service_pb2_grpc.ClientServiceStub(self._channel)

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
        stubs = (self.artifacts, self.meter, self.clients)
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
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        kind: str = "dataset",
        progress: Callable[[int, int], None] | None = None,
    ) -> artifact_pb2.Artifact:
        """Hash a file, ask for a grant, PUT the bytes (unless the org holds them already),
        and have the service read them back and verify them (a dataset is refused there,
        and deleted, unless its rows are ones a job can train on)."""
        path = Path(path)
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

                    try:
                        answer = http.put(url, content=body(), headers=headers)
                    except httpx.TransportError:
                        raise _unreachable_store() from None
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
        self,
        sha256: str,
        target: str | os.PathLike[str],
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> Path:
        """Download an object and verify its sha256 before it lands at `target`; nothing
        is left behind when it does not verify."""
        target = Path(target)
        artifact = self.get_artifact(sha256)
        partial = target.with_name(target.name + ".partial")
        digest, got = hashlib.sha256(), 0
        try:
            with httpx.stream(
                "GET", artifact.url, headers=dict(artifact.headers), timeout=600
            ) as answer:
                if answer.status_code >= 300:
                    raise TrainyardError(
                        grpc.StatusCode.UNAVAILABLE,
                        "DOWNLOAD_REFUSED",
                        f"The object store refused the download ({answer.status_code}).",
                        {},
                    )
                with partial.open("wb") as fh:
                    for chunk in answer.iter_bytes(1 << 20):
                        fh.write(chunk)
                        digest.update(chunk)
                        got += len(chunk)
                        if progress:
                            progress(got, int(artifact.size))
        except httpx.TransportError:
            partial.unlink(missing_ok=True)
            raise _unreachable_store() from None
        if digest.hexdigest() != sha256:
            partial.unlink(missing_ok=True)
            raise TrainyardError(
                grpc.StatusCode.DATA_LOSS,
                "ARTIFACT_MISMATCH",
                "The downloaded bytes do not have the sha256 asked for; nothing was kept.",
                {"sha256": sha256},
            )
        partial.replace(target)
        return target

    def download_job(
        self,
        job_id: str,
        directory: str | os.PathLike[str],
        *,
        state: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Path:
        """Download a job's result (`state`: its resumable training state instead), verify
        its sha256 and unpack it into `directory`, which must not exist or be empty. It is
        unpacked beside it first and moved there whole, so a failed download, check or
        unpack leaves nothing. Raises `RESULT_UNAVAILABLE` (or `CHECKPOINT_UNAVAILABLE`)
        while the job has none."""
        directory = Path(directory)
        result = self.get_job(job_id).result
        sha256 = result.checkpoint_sha256 if state else result.sha256
        if not sha256:
            what = "resumable state" if state else "result"
            raise TrainyardError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "CHECKPOINT_UNAVAILABLE" if state else "RESULT_UNAVAILABLE",
                f"The job has no verified {what} to download (yet).",
                {"job": job_id},
            )
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise FileExistsError(f"{directory} exists and is not an empty directory")
        directory.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(
            prefix=f".{directory.name}.", dir=directory.parent
        ) as work:
            packed = self.download(sha256, Path(work) / "packed.tar", progress=progress)
            try:
                with packed.open("rb") as fh:
                    packing.unpack(fh, Path(work) / "files")
            except tarfile.TarError:
                raise TrainyardError(
                    grpc.StatusCode.DATA_LOSS,
                    "ARTIFACT_UNPACKABLE",
                    "The object is not a directory packed as a job's output; nothing was kept.",
                    {"sha256": sha256},
                ) from None
            os.replace(Path(work) / "files", directory)
        return directory

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
    ) -> TrainingClient:
        """Create an interactive training client (operator keys; `org` is the org it is for,
        sent as `x-org-id`) and wait up to `wait` seconds for an engine to load it. Raises
        `CLIENT_GONE` when the engine could not; a client still `placing` after `wait` is
        answered as it is (its calls queue until it loads)."""
        lora = client_pb2.LoraConfig(targets=list(targets))
        if rank is not None:
            lora.rank = rank
        if alpha is not None:
            lora.alpha = alpha
        if seed is not None:
            lora.seed = seed
        request = client_service_pb2.CreateTrainingClientRequest(
            base_model=base_model, wait=max(0, min(wait, MAX_WAIT))
        )
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


def _unreachable_store() -> TrainyardError:
    return TrainyardError(
        grpc.StatusCode.UNAVAILABLE,
        "OBJECT_STORE_UNREACHABLE",
        "The object store named by the grant did not answer.",
        {},
    )


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
