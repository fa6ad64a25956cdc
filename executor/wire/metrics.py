"""The executor's Prometheus metrics: tasks running, reports sent, and report lag, the
seconds from an event made here to the service's acknowledgement that it is committed.

The lag is measured here because only the executor knows when an event was made: the wire
carries no time of its own, and an acknowledgement comes once the event is durable."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trainyard.exposition import Exporter

# Reports go out about once a second; a report refused or a stream broken waits longer.
LAG_BUCKETS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ExecutorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.tasks_running = Gauge(
            "trainyard_executor_tasks_running",
            "Tasks this executor runs now.",
            registry=self.registry,
        )
        self.connected = Gauge(
            "trainyard_executor_connected",
            "1 while this executor's stream to ClaimService is open and welcomed.",
            registry=self.registry,
        )
        self.reports = Counter(
            "trainyard_executor_reports_sent",
            "Reports sent on the stream, heartbeats included.",
            registry=self.registry,
        )
        self.events = Counter(
            "trainyard_executor_events_sent",
            "Events sent on the stream; an event sent again after a break counts again.",
            registry=self.registry,
        )
        self.report_lag = Histogram(
            "trainyard_report_lag_seconds",
            "Seconds from an event made on the executor to its acknowledgement as committed.",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )

    def serve(self, port: int) -> Exporter:
        """Serve the metrics on loopback for the life of the process."""
        return Exporter(self.registry, port)
