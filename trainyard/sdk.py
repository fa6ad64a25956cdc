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

import concurrent.futures
import hashlib
import os
import queue
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import grpc
import httpx
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

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

DEFAULT_URL = "http://127.0.0.1:8080"


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
        reason, metadata, violations = "", {}, []
        for detail in status.details if status else ():
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                violations = [(v.field, v.description) for v in bad.field_violations]
        code = exc.code()  # type: ignore[attr-defined]
        return cls(
            code, reason or code.name, exc.details() or "", metadata,  # type: ignore[attr-defined]
            answered=bool(reason)
            or code != grpc.StatusCode.UNAVAILABLE
            or "failed to connect" not in (exc.details() or ""),  # type: ignore[attr-defined]
            violations=violations,
        )  # fmt: skip


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
        self._channel = _channel(self.url)
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
            base_model=base_model, wait=max(0, min(wait, _MAX_WAIT))
        )
        if rank is not None or alpha is not None or targets or seed is not None:
            request.lora_config.CopyFrom(lora)
        started = time.monotonic()
        made = self._call(
            "CreateTrainingClient", request, timeout=request.wait + _RPC_MARGIN, org=org
        )
        while made.status == "placing" and time.monotonic() - started < wait:
            time.sleep(1.0)
            made = self._call(
                "GetTrainingClient",
                client_service_pb2.GetTrainingClientRequest(id=made.id),
                org=org,
            )
        _check_live(made)
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


# -- training clients ----------------------------------------------------------------------

# The server's longest `wait`, and how much longer than a call's `wait` its deadline is.
_MAX_WAIT = 120
_RPC_MARGIN = 30
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_ENDED = ("done", "failed")
_METHODS = {
    "forward_backward": "RunForwardBackward",
    "optim_step": "RunOptimStep",
    "sample": "SampleTrainingClient",
    "save_weights": "SaveTrainingClientWeights",
}
# The status code of a failed future's reason, as the service raises it in-line.
_FAILED_CODES = {
    "VALIDATION_ERROR": grpc.StatusCode.INVALID_ARGUMENT,
    "INTERNAL_ERROR": grpc.StatusCode.UNAVAILABLE,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
}

Output = (
    client_pb2.ForwardBackwardOutput
    | client_pb2.OptimStepOutput
    | client_pb2.SampleOutput
    | client_pb2.SaveWeightsOutput
)
DatumLike = client_pb2.Datum | Mapping[str, Any] | str
PromptLike = client_pb2.ModelInput | Mapping[str, Any] | str | Sequence[int]


def datum_from_text(text: str) -> client_pb2.Datum:
    """A datum of text alone: each position predicts the next token."""
    return client_pb2.Datum(model_input=client_pb2.ModelInput(text=text))


def datum_from_tokens(
    tokens: Sequence[int], targets: Sequence[int], weights: Sequence[float] | None = None
) -> client_pb2.Datum:
    """A datum of token ids, the token each position should predict, and their weights
    (1 each when None)."""
    return client_pb2.Datum(
        model_input=client_pb2.ModelInput(tokens=list(tokens)),
        loss_fn_inputs=client_pb2.LossFnInputs(
            target_tokens=list(targets), weights=list(weights or ())
        ),
    )


def to_datum(item: DatumLike) -> client_pb2.Datum:
    """A Datum from a Datum, its proto-JSON dict, or text."""
    if isinstance(item, client_pb2.Datum):
        return item
    if isinstance(item, str):
        return datum_from_text(item)
    if isinstance(item, Mapping):
        return json_format.ParseDict(dict(item), client_pb2.Datum())
    raise TypeError(f"a datum must be a Datum, a dict or text, not {type(item).__name__}")


def to_model_input(prompt: PromptLike) -> client_pb2.ModelInput:
    """A ModelInput from text, token ids, its proto-JSON dict, or a ModelInput."""
    if isinstance(prompt, client_pb2.ModelInput):
        return prompt
    if isinstance(prompt, str):
        return client_pb2.ModelInput(text=prompt)
    if isinstance(prompt, Mapping):
        return json_format.ParseDict(dict(prompt), client_pb2.ModelInput())
    if isinstance(prompt, Sequence) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return client_pb2.ModelInput(tokens=list(cast(Sequence[int], prompt)))
    raise TypeError("a prompt must be text, token ids, a dict or a ModelInput")


def _message(value: Any, kind: type[Any]) -> Any:
    if value is None:
        return kind()
    if isinstance(value, kind):
        return value
    return json_format.ParseDict(dict(value), kind())


def _transient(exc: grpc.RpcError) -> bool:
    """A failure of the transport (no ErrorInfo: the gateway or service never answered),
    which the same request, sent again, may get past."""
    if exc.code() not in _TRANSIENT:  # type: ignore[attr-defined]
        return False
    try:
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    except ValueError:
        return True
    return not any(
        d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR) for d in (status.details if status else ())
    )


def _check_live(client: client_pb2.TrainingClient) -> None:
    if client.status not in ("placing", "ready"):
        raise TrainyardError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "CLIENT_GONE",
            client.message or f"The training client is {client.status}.",
            {"status": client.status, "reason": client.reason},
        )


def _future_error(future: client_pb2.Future) -> TrainyardError:
    err = future.error
    reason = err.code or "INTERNAL_ERROR"
    return TrainyardError(
        _FAILED_CODES.get(reason, grpc.StatusCode.FAILED_PRECONDITION),
        reason,
        err.message or "The call failed.",
        {"field": err.field} if err.field else {},
    )


class APIFuture:
    """One call on a training client, on its way: `result()` waits for its output."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        # Known once the call was accepted: the future's id and the call's sequence number.
        self.future_id = ""
        self.seq = 0
        self._done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def result(self, timeout: float | None = None) -> Any:
        """The call's output (`ForwardBackwardOutput`, `OptimStepOutput`, `SampleOutput`
        or `SaveWeightsOutput`); raises its `TrainyardError` when it failed, and
        `TimeoutError` when it has not ended within `timeout` seconds."""
        return self._done.result(timeout)

    def done(self) -> bool:
        return self._done.done()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._done.exception(timeout)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<APIFuture {self.kind} seq={self.seq} {self.future_id or '-'} {state}>"


class _Call:
    def __init__(self, kind: str, payload: Mapping[str, Any]) -> None:
        self.kind = kind
        self.payload = payload
        self.future = APIFuture(kind)


class TrainingClient:
    """A model an engine holds in memory, trained call by call (Tinker's loop).

    Each call answers an `APIFuture` at once: one worker thread sends the calls in the
    order they were made, with consecutive sequence numbers, so they may be pipelined. A
    call that does not end within `call_wait` seconds is long-polled; one cut off by the
    transport is sent again with the same sequence number (which never runs twice) for up
    to `retry_for` seconds. As a context manager it deletes the client on exit."""

    def __init__(
        self,
        sdk: Client,
        client: client_pb2.TrainingClient,
        *,
        org: str = "",
        call_wait: int = 30,
        retry_for: float = 60.0,
    ) -> None:
        self.id = client.id
        self.base_model = client.base_model
        self._sdk = sdk
        self._org = org
        self._wait = max(0, min(call_wait, _MAX_WAIT))
        self._retry_for = retry_for
        # The next call's sequence number; only the worker moves it after this.
        self._next_seq = max(client.seq, 0) + 1
        self._queue: queue.Queue[_Call | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name=f"trainyard-{self.id}", daemon=True)
        self._worker.start()

    def __enter__(self) -> TrainingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def __repr__(self) -> str:
        return f"<TrainingClient {self.id} {self.base_model}>"

    # -- reads and lifecycle ---------------------------------------------------------------

    def get(self) -> client_pb2.TrainingClient:
        """The client as the service holds it: status, step, seq and loss history."""
        return self._send(
            "GetTrainingClient", client_service_pb2.GetTrainingClientRequest(id=self.id)
        )  # type: ignore[no-any-return]

    def losses(self) -> list[float]:
        """The loss of each forward_backward applied, in order."""
        return [p.loss for p in self.get().loss_history]

    def delete(self) -> client_pb2.TrainingClient:
        """Drop the client and free its engine memory; calls not yet answered fail."""
        self.close()
        return self._send(  # type: ignore[no-any-return]
            "DeleteTrainingClient", client_service_pb2.DeleteTrainingClientRequest(id=self.id)
        )

    def close(self) -> None:
        """Take no more calls; those made still go out. The client itself stays."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(None)

    # -- calls -----------------------------------------------------------------------------

    def forward_backward(
        self, data: Iterable[DatumLike], loss_fn: str = "cross_entropy"
    ) -> APIFuture:
        """Accumulate gradients over `data` (Datums, their proto-JSON dicts, or text)."""
        return self._submit(
            "forward_backward", {"data": [to_datum(d) for d in data], "loss_fn": loss_fn}
        )

    def optim_step(
        self, adam_params: Mapping[str, Any] | client_pb2.AdamParams | None = None
    ) -> APIFuture:
        """Apply Adam (`learning_rate`, `beta1`, `beta2`, `eps`) to the gradients."""
        return self._submit(
            "optim_step", {"adam_params": _message(adam_params, client_pb2.AdamParams)}
        )

    def sample(
        self,
        prompt: PromptLike,
        num_samples: int = 1,
        sampling_params: Mapping[str, Any] | client_pb2.SamplingParams | None = None,
    ) -> APIFuture:
        """Decode from the current weights; `sampling_params` as `SamplingParams`
        (`{"max_tokens": 16, "temperature": 0}` decodes greedily)."""
        return self._submit(
            "sample",
            {
                "prompt": to_model_input(prompt),
                "num_samples": num_samples,
                "sampling_params": _message(sampling_params, client_pb2.SamplingParams),
            },
        )

    def save_weights(self, name: str) -> APIFuture:
        """Write the adapter as an artifact of the org; the output names its sha256."""
        return self._submit("save_weights", {"name": name})

    # -- the worker --------------------------------------------------------------------------

    def _submit(self, kind: str, payload: Mapping[str, Any]) -> APIFuture:
        call = _Call(kind, payload)
        with self._lock:  # the queue's order is the calls' order, and so their seqs'
            if self._closed:
                raise RuntimeError(f"training client {self.id} is closed")
            self._queue.put(call)
        return call.future

    def _run(self) -> None:
        while (call := self._queue.get()) is not None:
            try:
                output = self._execute(call)
            except BaseException as exc:  # handed to the caller
                call.future._done.set_exception(exc)
            else:
                call.future._done.set_result(output)

    def _execute(self, call: _Call) -> Output:
        method = _METHODS[call.kind]
        seq, bumps = self._next_seq, 0
        while True:
            request = _REQUESTS[call.kind](id=self.id, seq=seq, wait=self._wait, **call.payload)
            try:
                future: client_pb2.Future = self._send(
                    method, request, timeout=self._wait + _RPC_MARGIN
                )
                break
            except TrainyardError as exc:
                if exc.reason == "IDEMPOTENCY_KEY_REUSED" and bumps < 64:
                    # Another call holds this number (one made before attaching, or one
                    # that failed in-line): take the next.
                    seq, bumps = seq + 1, bumps + 1
                    continue
                self._next_seq = self._after_refusal(seq)
                if self._next_seq > seq:  # it took its number, and failed on the engine
                    call.future.seq = seq
                raise
        self._next_seq = future.seq + 1
        call.future.future_id, call.future.seq = future.id, future.seq
        while future.status not in _ENDED:
            future = self._send(
                "GetFuture",
                client_service_pb2.GetFutureRequest(id=future.id, wait=self._wait),
                timeout=self._wait + _RPC_MARGIN,
            )
        if future.status == "failed":
            raise _future_error(future)
        return getattr(future, future.WhichOneof("output") or call.kind)  # type: ignore[no-any-return]

    def _after_refusal(self, seq: int) -> int:
        """The next number after a call refused in-line: past it when the engine applied
        it (it failed there), else the same (it was refused before it was stored, and a
        gap would hold every later call back)."""
        try:
            applied = self.get().seq
        except TrainyardError:
            return seq  # the next call finds out, by IDEMPOTENCY_KEY_REUSED
        return seq + 1 if applied >= seq else seq

    def _send(self, method: str, request: Any, *, timeout: float | None = None) -> Any:
        """One unary call, sent again unchanged while the transport fails, for up to
        `retry_for` seconds."""
        md = self._sdk._md(**({"x-org-id": self._org} if self._org else {}))
        stub = getattr(self._sdk.clients, method)
        deadline, delay = time.monotonic() + self._retry_for, 0.25
        while True:
            try:
                return stub(request, metadata=md, timeout=timeout or self._sdk._timeout)
            except grpc.RpcError as exc:
                if not _transient(exc) or time.monotonic() + delay > deadline:
                    raise TrainyardError.from_rpc(exc) from None
            time.sleep(delay)
            delay = min(delay * 2, 8.0)


_REQUESTS: dict[str, Callable[..., Any]] = {
    "forward_backward": client_service_pb2.RunForwardBackwardRequest,
    "optim_step": client_service_pb2.RunOptimStepRequest,
    "sample": client_service_pb2.SampleTrainingClientRequest,
    "save_weights": client_service_pb2.SaveTrainingClientWeightsRequest,
}
