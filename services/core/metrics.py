"""Every Prometheus metric the services export, named here once.

Each process keeps its metrics on a registry of its own, built by its composition root
and injected where they are counted: in-process tests build several services side by
side, and the default global registry would refuse the second. The supervisor asks each
process to serve them on loopback (`TRAINYARD_METRICS_PORT`, see `trainyard.exposition`);
without it nothing is served.

Gauges of what the database holds (jobs by state, device-seconds held, bytes stored) are
collectors that read the store at scrape time, each in the one process that owns the
table, so two processes never export the same series.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterable, Iterator

import grpc
import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.core import errors, webhooks
from services.core.money.tables import HoldRow
from services.core.object_tables import ObjectRow
from services.core.states import HoldStatus, JobStatus, ObjectStatus
from services.core.store import Store, utcnow
from services.core.tables import JobRow
from services.core.webhooks import DeliveryRow
from trainyard.exposition import Exporter

log = logging.getLogger(__name__)

# Metrics are served on loopback only: they name methods and counts, never a caller, but
# they are an operator's view, not a public one.


def outcome(exc: BaseException | None) -> tuple[str, str]:
    """The gRPC code and the stable reason a call ended with, as the interceptor answers
    it: a domain error's own code and reason, anything unexpected INTERNAL."""
    if exc is None:
        return "OK", ""
    if isinstance(exc, errors.DomainError):
        return exc.code.name, exc.reason
    if isinstance(exc, NotImplementedError):
        return grpc.StatusCode.UNIMPLEMENTED.name, "UNIMPLEMENTED"
    if isinstance(exc, asyncio.CancelledError):
        # The caller went away (an executor's stream closing, a deadline passing).
        return grpc.StatusCode.CANCELLED.name, ""
    return grpc.StatusCode.INTERNAL.name, "INTERNAL_ERROR"


def split_method(method: str) -> tuple[str, str]:
    """`/pkg.Service/Method` as (`pkg.Service`, `Method`)."""
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


class RpcMetrics:
    """What the interceptor counts of every call but health and reflection."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.handled = Counter(
            "trainyard_rpc_handled",
            "RPCs finished, by method, gRPC code and stable reason (empty when OK).",
            ["service", "method", "code", "reason"],
            registry=registry,
        )
        self.seconds = Histogram(
            "trainyard_rpc_duration_seconds",
            "Seconds a unary RPC took in the service, by method (streams: see open streams).",
            ["service", "method"],
            registry=registry,
        )
        self.streams_open = Gauge(
            "trainyard_rpc_streams_open",
            "Streaming RPCs open now, by method.",
            ["service", "method"],
            registry=registry,
        )


class ClaimMetrics:
    """What ClaimService counts: claims, lapsed leases, events ingested, executors."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.claims = Counter(
            "trainyard_claims",
            "Tasks leased to an executor; platform is true for the platform's executors.",
            ["platform"],
            registry=registry,
        )
        self.lease_expiries = Counter(
            "trainyard_lease_expiries",
            "Leases the sweep ended because they lapsed unrenewed.",
            registry=registry,
        )
        self.events = Counter(
            "trainyard_events_ingested",
            "Task events committed from executors' reports, by type (replays not counted).",
            ["type"],
            registry=registry,
        )
        # Each step's figures as its lead trainer reported them (executor/trainers/throughput.py).
        self.tokens_per_second = Histogram(
            "trainyard_training_tokens_per_second",
            "Training steps by the trained tokens a second their job's devices reached together.",
            buckets=(1e2, 3e2, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7),
            registry=registry,
        )
        self.mfu = Histogram(
            "trainyard_training_mfu",
            "Training steps by model FLOPs utilisation; a step on a device without a known "
            "dense peak (a CPU) has none and is not observed.",
            buckets=(0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8),
            registry=registry,
        )
        self.executors = Gauge(
            "trainyard_executors_connected",
            "Executors with a stream open to this process, past their hello.",
            registry=registry,
        )
        self.client_operations = Counter(
            "trainyard_client_operations",
            "Training clients' calls their engines answered, by kind and outcome (done or "
            "failed); a resend after a reconnect is not counted again.",
            ["kind", "outcome"],
            registry=registry,
        )
        self.engine_seconds = Counter(
            "trainyard_client_engine_seconds",
            "Engine-seconds of training clients' calls that succeeded (what client-second meters).",
            registry=registry,
        )


class _StoreCollector(Collector):
    """A collector that reads the store at scrape time; a failed read is logged and
    yields nothing, so the process's other metrics still answer."""

    what = ""

    def __init__(self, store: Store) -> None:
        self._store = store

    def collect(self) -> Iterable[Metric]:
        try:
            with self._store.unit(write=False) as session:
                return list(self._read(session))
        except Exception:
            log.exception("cannot read %s for metrics", self.what)
            return []

    def _read(self, session: sa.orm.Session) -> Iterator[Metric]:
        raise NotImplementedError


class JobsByState(_StoreCollector):
    """Jobs in each state, every org together, with 0 for a state none is in (JobService)."""

    what = "jobs by state"

    def _read(self, session: sa.orm.Session) -> Iterator[Metric]:
        counts = dict.fromkeys((s.value for s in JobStatus), 0)
        rows = session.execute(sa.select(JobRow.status, sa.func.count()).group_by(JobRow.status))
        for status, count in rows:
            counts[status] = int(count)
        family = GaugeMetricFamily("trainyard_jobs", "Jobs by state.", labels=["state"])
        for status, count in counts.items():
            family.add_metric([status], count)
        yield family


class DeviceSeconds(_StoreCollector):
    """Device-seconds from the holds table (MeterService)."""

    what = "holds"

    def _read(self, session: sa.orm.Session) -> Iterator[Metric]:
        held = session.scalar(
            sa.select(sa.func.coalesce(sa.func.sum(HoldRow.held_seconds), 0)).where(
                HoldRow.status == HoldStatus.LIVE
            )
        )
        yield GaugeMetricFamily(
            "trainyard_held_device_seconds",
            "Device-seconds held now by running tasks' windows.",
            value=int(held or 0),
        )
        used = CounterMetricFamily(
            "trainyard_charged_device_seconds",
            "Device-seconds metered by the clock; charged is false on an org's own machines.",
            labels=["charged"],
        )
        totals = {True: 0, False: 0}
        rows = session.execute(
            sa.select(HoldRow.charged, sa.func.sum(HoldRow.used_seconds)).group_by(HoldRow.charged)
        )
        for charged, seconds in rows:
            totals[bool(charged)] = int(seconds or 0)
        for charged, seconds in totals.items():
            used.add_metric([str(charged).lower()], seconds)
        yield used


class StoredBytes(_StoreCollector):
    """Bytes in the object store by status: `stored`, or `pending` (granted, not yet
    confirmed) (ArtifactService)."""

    what = "objects"

    def _read(self, session: sa.orm.Session) -> Iterator[Metric]:
        totals = {str(s): 0 for s in (ObjectStatus.STORED, ObjectStatus.PENDING)}
        rows = session.execute(
            sa.select(ObjectRow.status, sa.func.sum(ObjectRow.size)).group_by(ObjectRow.status)
        )
        for status, size in rows:
            totals[status] = int(size or 0)
        family = GaugeMetricFamily(
            "trainyard_stored_bytes", "Bytes of objects, by status.", labels=["status"]
        )
        for status, size in totals.items():
            family.add_metric([status], size)
        yield family


class SilentJobs(_StoreCollector):
    """Running jobs that have reported nothing (no status, metric or log) for at least 5,
    15 and 60 minutes, every org together (JobService): what the stalled-job alert reads.
    Heartbeats do not count, as for the `job.stalled` webhook."""

    what = "silent jobs"
    OVER = (300, 900, 3600)

    def _read(self, session: sa.orm.Session) -> Iterator[Metric]:
        now = utcnow()
        family = GaugeMetricFamily(
            "trainyard_jobs_silent",
            "Running jobs whose last event is at least `over` seconds old.",
            labels=["over"],
        )
        for over in self.OVER:
            count = session.scalar(
                sa.select(sa.func.count()).where(
                    JobRow.status == JobStatus.RUNNING,
                    JobRow.update_time <= now - dt.timedelta(seconds=over),
                )
            )
            family.add_metric([str(over)], int(count or 0))
        yield family


class WebhookDeliveries(_StoreCollector):
    """Webhook deliveries by status, and how long the oldest pending one has waited
    (WebhookService, in the meter process)."""

    what = "webhook deliveries"

    def _read(self, session: sa.orm.Session) -> Iterator[Metric]:
        counts = dict.fromkeys((webhooks.PENDING, webhooks.SUCCEEDED, webhooks.FAILED), 0)
        rows = session.execute(
            sa.select(DeliveryRow.status, sa.func.count()).group_by(DeliveryRow.status)
        )
        for status, count in rows:
            counts[status] = int(count)
        family = GaugeMetricFamily(
            "trainyard_webhook_deliveries",
            "Webhook deliveries by status; `failed` gave up after the retry window.",
            labels=["status"],
        )
        for status, count in counts.items():
            family.add_metric([status], count)
        yield family
        oldest = session.scalar(
            sa.select(sa.func.min(DeliveryRow.create_time)).where(
                DeliveryRow.status == webhooks.PENDING
            )
        )
        waited = (utcnow() - _utc(oldest)).total_seconds() if oldest else 0.0
        yield GaugeMetricFamily(
            "trainyard_webhook_oldest_pending_seconds",
            "Seconds the oldest pending webhook delivery has waited; 0 when none waits.",
            value=max(0.0, waited),
        )


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value


class Metrics:
    """One process's registry and the metrics every service keeps."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.rpc = RpcMetrics(self.registry)

    def serve(self, port: int) -> Exporter:
        return Exporter(self.registry, port)
