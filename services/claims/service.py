"""ClaimService's use cases behind one face, shared by the executor stream and the unary
REST routes: `leases` (hello, claims, releases, the expiry sweep, calls under a lease) and
`reports` (report ingestion). No grpc here; the servicer and the stream call these."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry

from services.claims.leases import Leases
from services.claims.offers import Offer
from services.claims.reports import Reports
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.metrics import ClaimMetrics
from services.core.store import Store, utcnow
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.training.catalog import Catalog


class ClaimService:
    def __init__(
        self,
        store: Store,
        config: Config,
        artifacts: ArtifactClient | None = None,
        catalog: Catalog | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
        metrics: ClaimMetrics | None = None,
    ) -> None:
        self.metrics = metrics or ClaimMetrics(CollectorRegistry())
        self.leases = Leases(store, config, artifacts, catalog, clock)
        self.reports = Reports(store, self.leases, artifacts, clock, self.metrics)

    def hello(
        self, principal: Principal, offer: Offer, leases: Sequence[tuple[str, str]]
    ) -> tuple[str, list[str], list[str]]:
        return self.leases.hello(principal, offer, leases)

    def goodbye(self, executor_id: str) -> None:
        self.leases.goodbye(executor_id)

    def claim(
        self, principal: Principal, offer: Offer, executor_id: str = ""
    ) -> claim_service_pb2.ClaimTaskResponse | None:
        found = self.leases.claim(principal, offer, executor_id)
        if found is not None:
            self.metrics.claims.labels(str(offer.platform).lower()).inc()
        return found

    def release(self, principal: Principal, task_id: str, token: str) -> None:
        self.leases.release(principal, task_id, token)

    def expire_leases(self) -> int:
        lost = self.leases.expire()
        self.metrics.lease_expiries.inc(lost)
        return lost

    def cancels_due(self, executor_id: str) -> list[tuple[str, str]]:
        return self.leases.cancels_due(executor_id)

    def job_of(self, task_id: str) -> str:
        return self.leases.job_of(task_id)

    def register_artifact(
        self, principal: Principal, request: claim_service_pb2.RegisterTaskArtifactRequest
    ) -> artifact_pb2.Grant:
        return self.leases.register_artifact(principal, request)

    def read_input(
        self, principal: Principal, request: claim_service_pb2.ReadTaskInputRequest
    ) -> artifact_pb2.Artifact:
        return self.leases.read_input(principal, request)

    def report(
        self,
        principal: Principal,
        job_id: str,
        task_id: str,
        token: str,
        events: Sequence[task_pb2.TaskEvent],
    ) -> claim_service_pb2.ReportTaskResponse:
        return self.reports.report(principal, job_id, task_id, token, events)
