"""ClaimService's use cases, shared by the executor stream and the unary REST routes:
`leases` (hello, claims, releases, the expiry sweep, calls under a lease), `reports`
(report ingestion), and the training clients' `clients` and `engines`. What spans them is
here (a hello, a goodbye, the expiry sweep, the claim metric); the servicer and the stream
call the rest directly, each telling a client's call from a task's where it receives it.
No grpc here."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Sequence

from prometheus_client import CollectorRegistry

from services.claims.clients.engines import Engines
from services.claims.clients.service import Clients
from services.claims.leases import Leases
from services.claims.reports import Reports
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.metrics import ClaimMetrics
from services.core.offers import Offer
from services.core.store import Store, utcnow
from trainyard.claim.v1 import claim_service_pb2
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
        self.reports = Reports(
            store, self.leases, artifacts, clock, self.metrics, config.max_job_events
        )
        # Training clients are leased on the same executors and answer on their streams.
        self.clients = Clients(store, config, catalog or Catalog(), clock, artifacts)
        self.engines = Engines(store, config, artifacts, clock)

    def hello(
        self,
        principal: Principal,
        offer: Offer,
        leases: Sequence[tuple[str, str]],
        abandoned: Sequence[tuple[str, str]] = (),
        previous: str = "",
    ) -> tuple[str, list[str], list[str], set[str]]:
        """Register an executor; of the tasks and clients it names, those it goes on with,
        those it lost, and which of them are clients (an id with a client row). The tasks
        an earlier process of it `abandoned` are lost at once; those its `previous`
        session was leased and it does not name are given back."""
        if abandoned:
            self.metrics.lease_expiries.inc(self.leases.abandon(principal, abandoned))
        clients = self.engines.among([held for held, _ in leases])
        tasks = [(t, lease) for t, lease in leases if t not in clients]
        executor_id, resumed, lost = self.leases.hello(principal, offer, tasks, previous)
        named = [(c, lease) for c, lease in leases if c in clients]
        if named or offer.clients:
            kept, gone = self.engines.resume(principal, executor_id, offer.machine, named)
            resumed, lost = [*resumed, *kept], [*lost, *gone]
        return executor_id, resumed, lost, clients

    def announce(self, executor_id: str, offer: Offer) -> None:
        """Keep what a connected executor now offers, which creates and estimates read."""
        self.leases.announce(executor_id, offer)

    def goodbye(self, executor_id: str, delivered: Collection[str] = ()) -> None:
        """The executor's stream ended, having delivered the tasks in `delivered` (those
        it resumed, and those it assigned)."""
        self.leases.goodbye(executor_id, delivered)
        self.engines.goodbye(executor_id)

    def claim(
        self, principal: Principal, offer: Offer, executor_id: str = "", *, probe: bool = False
    ) -> claim_service_pb2.ClaimTaskResponse | None:
        found = self.leases.claim(principal, offer, executor_id, probe=probe)
        if found is not None:
            self.metrics.claims.labels(str(offer.platform).lower()).inc()
        return found

    def expire_leases(self) -> int:
        """End every task and every training client whose lease lapsed."""
        lost = self.leases.expire() + self.engines.expire()
        self.metrics.lease_expiries.inc(lost)
        return lost
