"""JobService's logic behind one door, for the servicer, the server's preparation loop and
tests. Each use case lives in its own module; a method here only hands over:

    create.py       EstimateJob, CreateJob: admission, idempotency, numbering, insert
    reads.py        GetJob, ListJobs, ListJobEvents, WatchJob, ListJobMetrics,
                    ListJobAttempts, ListJobDatasetItems, GetJobDatasetItem
    control.py      CancelJob, RetryJob
    publishing.py   PublishJob, ListPublished
    preparation.py  the dataset snapshot of a queued job (the server's background loop)
    store.py        every query; frozen.py the spec and plan as a job row holds them

No gRPC here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.auth import Principal
from services.core.config import Config
from services.core.pagetoken import PageTokens
from services.core.store import Store
from services.jobs import sources
from services.jobs.control import JobControl
from services.jobs.create import Admission, JobCreation
from services.jobs.preparation import Preparation
from services.jobs.publishing import Downloads, Publishing
from services.jobs.reads import JobReads
from trainyard.job.v1 import attempt_pb2, event_pb2, job_pb2, job_service_pb2, publication_pb2
from trainyard.training.catalog import Catalog

__all__ = ["Admission", "JobService"]


class JobService:
    def __init__(
        self,
        store: Store,
        catalog: Catalog,
        config: Config,
        tokens: PageTokens,
        reader: sources.DatasetReader | None = None,
        snapshots: sources.SnapshotKeeper | None = None,
        downloads: Downloads | None = None,
    ) -> None:
        self.creation = JobCreation(store, catalog, config, reader)
        self.reads = JobReads(store, tokens)
        self.control = JobControl(store, config)
        self.preparation = Preparation(store, reader, snapshots, catalog, config.retention_days)
        self.publishing = Publishing(store, downloads)

    # -- create.py -----------------------------------------------------------------------------

    def admit(self, principal: Principal, job: job_pb2.Job) -> Admission:
        return self.creation.admit(principal, job)

    def estimate(
        self, principal: Principal, body: Mapping[str, Any] | None, typed: job_pb2.Job
    ) -> tuple[Admission, job_service_pb2.Price, job_service_pb2.Price]:
        return self.creation.estimate(principal, body, typed)

    def create(
        self,
        principal: Principal,
        body: Mapping[str, Any] | None,
        typed: job_pb2.Job,
        *,
        request_id: str = "",
    ) -> tuple[job_pb2.Job, bool]:
        return self.creation.create(principal, body, typed, request_id=request_id)

    # -- reads.py ------------------------------------------------------------------------------

    def get(
        self, principal: Principal, job_id: str, identifier: str = "", project: str = ""
    ) -> job_pb2.Job:
        return self.reads.get(principal, job_id, identifier, project)

    def list_jobs(
        self, principal: Principal, *, status: str, project: str, size: int, token: str
    ) -> tuple[list[job_pb2.Job], str, int]:
        return self.reads.list_jobs(
            principal, status=status, project=project, size=size, token=token
        )

    def events(
        self, principal: Principal, job_id: str, *, after: int, size: int
    ) -> tuple[list[event_pb2.JobEvent], str]:
        return self.reads.events(principal, job_id, after=after, size=size)

    def job_version(self, principal: Principal, job_id: str) -> tuple[int, str]:
        return self.reads.job_version(principal, job_id)

    def metrics(
        self,
        principal: Principal,
        job_id: str,
        *,
        names: list[str],
        after_step: int,
        max_points: int = 0,
    ) -> job_service_pb2.ListJobMetricsResponse:
        return self.reads.metrics(
            principal, job_id, names=names, after_step=after_step, max_points=max_points
        )

    def attempts(self, principal: Principal, job_id: str) -> list[attempt_pb2.Attempt]:
        return self.reads.attempts(principal, job_id)

    def dataset_items(
        self, principal: Principal, job_id: str, *, offset: int, limit: int, search: str, split: str
    ) -> job_service_pb2.ListJobDatasetItemsResponse:
        return self.reads.dataset_items(
            principal, job_id, offset=offset, limit=limit, search=search, split=split
        )

    def dataset_item(self, principal: Principal, job_id: str, item_id: str) -> job_pb2.DatasetItem:
        return self.reads.dataset_item(principal, job_id, item_id)

    # -- control.py ----------------------------------------------------------------------------

    def cancel(self, principal: Principal, job_id: str, *, request_id: str = "") -> job_pb2.Job:
        return self.control.cancel(principal, job_id, request_id=request_id)

    def retry(
        self, principal: Principal, job_id: str, *, key: str, resume: bool, request_id: str = ""
    ) -> tuple[job_pb2.Job, attempt_pb2.Attempt]:
        return self.control.retry(principal, job_id, key=key, resume=resume, request_id=request_id)

    # -- publishing.py -------------------------------------------------------------------------

    def publish(
        self,
        principal: Principal,
        job_id: str,
        *,
        name: str,
        force: bool,
        route: publication_pb2.Route | None,
        request_id: str = "",
    ) -> publication_pb2.Publication:
        return self.publishing.publish(
            principal, job_id, name=name, force=force, route=route, request_id=request_id
        )

    def list_published(
        self, principal: Principal, revision: str
    ) -> job_service_pb2.ListPublishedResponse:
        return self.publishing.list_published(principal, revision)

    # -- preparation.py ------------------------------------------------------------------------

    def prepare_next(self) -> bool:
        return self.preparation.prepare_next()
