"""Prometheus metrics served over HTTP on loopback, on a port the supervisor can find.

The supervisor cannot pick a free port for a child ahead of time: between its pick and
the child's bind, another program may take it. So a child binds port 0 (any) the first
time, writes the port it got to `<run dir>/<name>.metrics.port`, and the supervisor reads
it; a restarted child asks for the same port again, so a scrape configuration stays
true, and takes any other only if that one was taken meanwhile."""

from __future__ import annotations

import contextlib
import errno
import threading
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trainyard import build

LOOPBACK = "127.0.0.1"


def metrics_url(port: int) -> str:
    return f"http://{LOOPBACK}:{port}/metrics"


def metrics_port_file(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.metrics.port"


class BuildInfo(Collector):
    """`trainyard_build_info{version, build}` 1: the code this process runs, read when it
    starts serving (files changed on disk later are another build's)."""

    def __init__(self) -> None:
        self.labels = [build.version(), build.build_id()]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "trainyard_build_info",
            "The code this process runs: the package version and the build (a digest of its "
            "source files).",
            labels=["version", "build"],
        )
        family.add_metric(self.labels, 1)
        yield family


class Exporter:
    """A registry served on loopback, on a thread, until `close`, with the process's build
    info beside what the registry holds."""

    def __init__(self, registry: CollectorRegistry, port: int = 0) -> None:
        with contextlib.suppress(ValueError):  # served before: it holds the info already
            registry.register(BuildInfo())
        self._server: WSGIServer
        self._thread: threading.Thread
        try:
            self._server, self._thread = start_http_server(port, addr=LOOPBACK, registry=registry)
        except OSError as exc:
            if port == 0 or exc.errno != errno.EADDRINUSE:
                raise
            # Metrics on another port beat a process that cannot start.
            self._server, self._thread = start_http_server(0, addr=LOOPBACK, registry=registry)
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        return metrics_url(self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
