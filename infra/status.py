"""`trainyard status`: one screen of the stack running under a home — each part's pid
(each replica of a service is a part), whether it is up and healthy, how often the
supervisor restarted it — and, from the parts' metrics, the queue depth, the jobs running
and the executors connected.

Everything is read from outside: `run/stack.json` (written by `trainyard up`), each
part's health answer and its Prometheus metrics on loopback. Nothing here writes."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc
import httpx
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from rich import box
from rich.console import Console
from rich.table import Table

from gateway.render import HTTP_SERVICES
from services.core.states import JobStatus
from services.core.store import create_engine, head_revision, schema_revision

TIMEOUT = 2.0
# Jobs waiting for an executor (a preparing job has its dataset snapshotted, or waits for
# a claim), and jobs an executor works on.
WAITING = (JobStatus.QUEUED, JobStatus.PREPARING)
WORKING = (JobStatus.RUNNING, JobStatus.EVALUATING, JobStatus.FINALIZING)


class NoStack(Exception):
    """No supervisor runs under the home."""


@dataclasses.dataclass
class Part:
    name: str
    pid: int
    up: bool
    health: str
    healthy: bool
    restarts: int
    samples: list[Sample] | None  # None: its metrics did not answer

    @property
    def ok(self) -> bool:
        return self.up and self.healthy


@dataclasses.dataclass
class Report:
    home: Path
    run_dir: Path
    info: dict[str, Any]
    parts: list[Part]
    # The store's schema revision (None: unreadable) and the newest this code ships.
    schema: str | None = None
    head: str = ""

    def part(self, name: str) -> Part | None:
        return next((p for p in self.parts if p.name == name), None)

    def answering(self, service: str) -> list[list[Sample]]:
        """The samples of each of a service's replicas whose metrics answered."""
        names = self.info.get("replicas", {}).get(service) or [service]
        return [p.samples for p in self.parts if p.name in names and p.samples is not None]

    def jobs(self, states: Iterable[str]) -> int | None:
        # Every replica counts the same rows: one answer is enough.
        answers = self.answering("jobs")
        if not answers:
            return None
        return int(sum(value(answers[0], "trainyard_jobs", state=s) for s in states))

    def executors(self) -> int | None:
        # Each replica counts the streams it holds.
        answers = self.answering("claims")
        if not answers:
            return None
        return int(sum(value(samples, "trainyard_executors_connected") for samples in answers))

    @property
    def ok(self) -> bool:
        return all(part.ok for part in self.parts)


def build_of(samples: list[Sample] | None) -> str:
    """The version and build a part's metrics name; `-` for a part that serves none."""
    for s in samples or ():
        if s.name == "trainyard_build_info":
            return f"{s.labels.get('version', '?')}+{s.labels.get('build', '?')}"
    return "-"


def schema_of(database_url: str) -> str | None:
    """The store's schema revision, read without writing; None when it cannot be read."""
    try:
        engine = create_engine(database_url)
        try:
            with engine.connect() as conn:
                return schema_revision(conn)
        finally:
            engine.dispose()
    except sa.exc.SQLAlchemyError:
        return None


def value(samples: Iterable[Sample], name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`."""
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def scrape(url: str, timeout: float = TIMEOUT) -> list[Sample] | None:
    """Every sample a metrics URL serves; None when it does not answer."""
    try:
        response = httpx.get(url, timeout=timeout)
        response.raise_for_status()
    except httpx.HTTPError:
        return None
    return [s for family in text_string_to_metric_families(response.text) for s in family.samples]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_info(run_dir: Path) -> dict[str, Any]:
    """What `trainyard up` wrote; NoStack when it is absent or its supervisor is gone."""
    path = run_dir / "stack.json"
    try:
        info: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise NoStack() from None
    if not alive(int(info.get("supervisor_pid", 0))):
        # Left by a supervisor that was killed before it could remove it.
        raise NoStack()
    return info


def _grpc_health(host: str, port: int) -> tuple[str, bool]:
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=TIMEOUT
            )
        except grpc.RpcError:
            return "no answer", False
    serving = answer.status == health_pb2.HealthCheckResponse.SERVING
    return ("serving" if serving else "not serving"), serving


def _http_health(url: str, *, want: int | None = None) -> tuple[str, bool]:
    try:
        code = httpx.get(url, timeout=TIMEOUT).status_code
    except httpx.HTTPError:
        return "no answer", False
    if want is not None and code != want:
        return f"answers {code}", False
    return ("ready" if want else "answering"), True


def _health(
    name: str, info: Mapping[str, Any], bind_host: str, samples: list[Sample] | None
) -> tuple[str, bool]:
    # Each replica's port by its name; a stack from before replicas lists services' only.
    ports = {n: p for replicas in info.get("replicas", {}).values() for n, p in replicas.items()}
    ports = ports or info.get("service_ports", {})
    if name in HTTP_SERVICES and name in ports:
        return _http_health(
            f"http://{bind_host}:{int(ports[name])}{HTTP_SERVICES[name][1]}", want=200
        )
    if name in ports:
        return _grpc_health(bind_host, int(ports[name]))
    if name == "envoy":
        return _http_health(f"http://127.0.0.1:{info['admin_port']}/ready", want=200)
    if name == "seaweedfs":
        return _http_health(str(info["s3_endpoint"]))
    if name == "executor":
        if samples is None:
            return "no answer", False
        connected = value(samples, "trainyard_executor_connected") >= 1
        return ("connected" if connected else "connecting"), True
    return "-", True


def gather(
    home: Path, run_dir: Path, bind_host: str = "127.0.0.1", database_url: str = ""
) -> Report:
    info = read_info(run_dir)
    metrics: dict[str, str] = info.get("metrics", {})
    parts = []
    for name, pid in info.get("pids", {}).items():
        up = alive(int(pid))
        samples = scrape(metrics[name]) if up and name in metrics else None
        health, healthy = _health(name, info, bind_host, samples) if up else ("-", False)
        restarts = int(info.get("restarts", {}).get(name, 0))
        parts.append(Part(name, int(pid), up, health, healthy, restarts, samples))
    schema = schema_of(database_url) if database_url else None
    return Report(home, run_dir, info, parts, schema, head_revision())


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


def render(report: Report, console: Console) -> None:
    info = report.info
    console.print(f"Trainyard under {report.home}")
    console.print(
        f"gateway {info.get('gateway_url', '?')}, supervisor pid {info.get('supervisor_pid', '?')}"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("process", "pid", "up", "health", "restarts", "metrics", "version"):
        table.add_column(column, justify="right" if column in ("pid", "restarts") else "left")
    for part in report.parts:
        style = None if part.ok else "red"
        table.add_row(
            part.name,
            str(part.pid),
            "yes" if part.up else "no",
            part.health,
            str(part.restarts),
            "ok" if part.samples is not None else "no answer",
            build_of(part.samples),
            style=style,
        )
    console.print(table)
    behind = "" if report.schema == report.head else f" (this code's newest is {report.head})"
    console.print(f"schema {report.schema or 'unreadable'}{behind}")
    waiting, working = report.jobs(WAITING), report.jobs(WORKING)
    queued, preparing = report.jobs([JobStatus.QUEUED]), report.jobs([JobStatus.PREPARING])
    console.print(
        f"queue depth {_count(waiting)} ({_count(queued)} queued, {_count(preparing)} "
        f"preparing), running {_count(working)}, executors connected "
        f"{_count(report.executors())}"
    )
    console.print(f"each process's metrics URL: `metrics` in {report.run_dir / 'stack.json'}")
