"""ClaimService's use cases behind one face, shared by the executor stream and the unary
REST routes: `leases` (hello, claims, releases, the expiry sweep, calls under a lease) and
`reports` (report ingestion). No grpc here; the servicer and the stream call these."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry

from services.claims.clients.engines import Engines
from services.claims.clients.service import Clients
from services.claims.leases import Leases
from services.claims.offers import Offer
from services.claims.reports import Reports
from services.core import ids
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
        self.wakeups = store.wakeups
        self.leases = Leases(store, config, artifacts, catalog, clock)
        self.reports = Reports(store, self.leases, artifacts, clock, self.metrics)
        # Training clients are leased on the same executors and answer on their streams.
        self.clients = Clients(store, config, catalog or Catalog(), clock)
        self.engines = Engines(store, config, artifacts, clock)

    def hello(
        self, principal: Principal, offer: Offer, leases: Sequence[tuple[str, str]]
    ) -> tuple[str, list[str], list[str]]:
        """Register an executor; of the tasks and clients it names, those it goes on with
        and those it lost."""
        tasks = [(t, lease) for t, lease in leases if not is_client(t)]
        executor_id, resumed, lost = self.leases.hello(principal, offer, tasks)
        clients = [(c, lease) for c, lease in leases if is_client(c)]
        if clients or offer.clients:
            kept, gone = self.engines.resume(principal, executor_id, offer.machine, clients)
            resumed, lost = [*resumed, *kept], [*lost, *gone]
        return executor_id, resumed, lost

    def goodbye(self, executor_id: str) -> None:
        self.leases.goodbye(executor_id)
        self.engines.goodbye(executor_id)

    def claim(
        self, principal: Principal, offer: Offer, executor_id: str = ""
    ) -> claim_service_pb2.ClaimTaskResponse | None:
        found = self.leases.claim(principal, offer, executor_id)
        if found is not None:
            self.metrics.claims.labels(str(offer.platform).lower()).inc()
        return found

    def release(self, principal: Principal, task_id: str, token: str, reason: str = "") -> None:
        if is_client(task_id):
            self.engines.release(principal, task_id, token, reason)
        else:
            self.leases.release(principal, task_id, token)

    def expire_leases(self) -> int:
        """End every task and every training client whose lease lapsed."""
        lost = self.leases.expire() + self.engines.expire()
        self.metrics.lease_expiries.inc(lost)
        return lost

    def cancels_due(self, executor_id: str) -> list[tuple[str, str]]:
        return self.leases.cancels_due(executor_id)

    def job_of(self, task_id: str) -> str:
        """The job a task belongs to; a client stands for itself."""
        return task_id if is_client(task_id) else self.leases.job_of(task_id)

    def register_artifact(
        self, principal: Principal, request: claim_service_pb2.RegisterTaskArtifactRequest
    ) -> artifact_pb2.Grant:
        if is_client(request.task):
            return self.engines.grant(principal, request)
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
        if is_client(task_id):  # a client's heartbeat: it carries no events
            return self.engines.renew(principal, task_id, token)
        return self.reports.report(principal, job_id, task_id, token, events)


def is_client(task_id: str) -> bool:
    return ids.is_id(task_id, "cli")
