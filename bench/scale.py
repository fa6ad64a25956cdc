"""Scale: a ClaimService holding 1,000 executors' streams over a store of 10,000 jobs,
on SQLite with one process per service, and on PostgreSQL (when one is named) with two
replicas of every service behind Envoy. Everything goes through the gateway.

- ListJobs, pages of 100 walked through the 10,000 jobs: p50, p99;
- claim latency with the streams connected: a job for one machine → its assignment;
- ClaimService's resident memory with the streams connected (each replica's);
- durable events/s with 200 tasks reporting at once, 500 events a report;
- the gateway's own throughput, measured by `wrk` (a native load generator): a route
  Envoy answers itself and a REST read it sends to JobService.

Each beside a baseline measured in the same run, with the stack up: a bare grpc.aio unary
echo round trip (ListJobs), a bare commit on the same store (claim latency), a bare
grpc.aio server holding as many streams (memory), bare commits of a report's rows on the
same store (ingestion), a bare Envoy answering every request itself (the gateway).
ListJobs, claim latency and the gateway are measured `--runs` times, in turn with their
baselines; ingestion in `--runs` windows of `--seconds` each, one after another.

The executors are simulated: a few processes, each holding its share of the streams on
one channel, answering assignments and reporting as an executor does.

    python -m bench.scale [--executors 1000] [--jobs 10000] [--reporting 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import multiprocessing
import queue
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import grpc
import sqlalchemy as sa
from google.protobuf import struct_pb2

from bench.figures import (
    ECHO,
    PAYLOAD,
    Figure,
    commit_rate,
    echo_server,
    envoy_direct,
    hold_streams,
    paired,
    report,
    rss_mb,
)
from bench.stack import databases, running
from services.core import ids
from services.core.store import create_engine
from services.core.tables import JobRow
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

SUPPORTS = task_pb2.Supports(adaptations=["full"], outputs=["checkpoint"])
PROCESSES = 4
BATCH = 500
IN_FLIGHT = 2
CLAIMS = 10  # jobs a run of claim latency
WRK_SECONDS = 3


def pct(values: Sequence[float], q: int) -> float:
    return (
        statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else values[0] * 1000
    )


# -- the simulated executors (one process each share) --------------------------------------


class Executor:
    """One executor's stream: it answers each assignment, and reports on the task for
    `windows` windows of `seconds` once `go` is set when its machine is one that reports,
    counting the events acknowledged in each window."""

    def __init__(self, stub: Any, md: list[tuple[str, str]], machine: str, reports: bool) -> None:
        self.stub, self.md, self.machine, self.reports = stub, md, machine, reports
        self.outbox: asyncio.Queue[claim_service_pb2.ConnectRequest | None] = asyncio.Queue()
        self.acks: asyncio.Queue[claim_service_pb2.Ack] = asyncio.Queue()
        self.reporting: set[asyncio.Task[None]] = set()

    async def requests(self):  # type: ignore[no-untyped-def]
        hello = claim_service_pb2.Hello(
            machine=self.machine, bases=["fixture-tiny-llm"], devices=["cpu"], supports=SUPPORTS,
            slots=1,
        )  # fmt: skip
        yield claim_service_pb2.ConnectRequest(hello=hello)
        while (item := await self.outbox.get()) is not None:
            yield item

    async def run(
        self, connected: asyncio.Event, out: Any, go: Any, seconds: float, windows: int
    ) -> None:
        call = self.stub.Connect(self.requests(), metadata=self.md)
        while (message := await call.read()) is not grpc.aio.EOF:
            kind = message.WhichOneof("kind")
            if kind == "welcome":
                connected.set()
            elif kind == "assignment":
                out.put(("assigned", message.assignment.job.id, time.time()))
                if self.reports:
                    task = message.assignment.task
                    reporting = self.report(task, out, go, seconds, windows)
                    self.reporting.add(asyncio.create_task(reporting))
            elif kind == "ack":
                self.acks.put_nowait(message.ack)

    async def report(self, task: Any, out: Any, go: Any, seconds: float, windows: int) -> None:
        await asyncio.to_thread(go.wait)
        seq, acked, in_flight = 0, 0, 0
        counts = [0] * windows
        span = seconds * windows
        began = time.perf_counter()
        while time.perf_counter() - began < span or in_flight:
            if in_flight == IN_FLIGHT or time.perf_counter() - began >= span:
                ack = await self.acks.get()
                assert not ack.reason, ack.reason
                window = int((time.perf_counter() - began) // seconds)
                if window < windows:  # acknowledged after the last window: not counted
                    counts[window] += ack.seq - acked
                acked, in_flight = ack.seq, in_flight - 1
                continue
            events = [
                task_pb2.TaskEvent(seq=seq + i, type="metric", name="loss", step=seq + i, value=1.0)
                for i in range(1, BATCH + 1)
            ]
            seq, in_flight = seq + BATCH, in_flight + 1
            report = claim_service_pb2.StreamReport(task=task.id, lease=task.lease, events=events)
            await self.outbox.put(claim_service_pb2.ConnectRequest(report=report))
        out.put(("reported", counts, time.perf_counter() - began))


def simulate(
    target: str, key: str, machines: list[str], reporting: set[str], out: Any, go: Any,
    seconds: float, windows: int,
) -> None:  # fmt: skip
    """A process's share of the executors, until it is terminated."""

    async def main() -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = claim_service_pb2_grpc.ClaimServiceStub(channel)
            md = [("authorization", f"Bearer {key}")]
            executors = [Executor(stub, md, m, m in reporting) for m in machines]
            events = [asyncio.Event() for _ in executors]
            runs = [
                asyncio.create_task(e.run(ev, out, go, seconds, windows))
                for e, ev in zip(executors, events, strict=True)
            ]
            for event in events:
                await event.wait()
            out.put(("connected", len(executors), 0.0))
            await asyncio.gather(*runs)

    asyncio.run(main())


# -- the measurements -----------------------------------------------------------------------


def seed(database_url: str, template_id: str, count: int) -> None:
    """`count` ended jobs in the template's org and project, copies of it, in one go."""
    engine = create_engine(database_url)
    with engine.connect().execution_options(trainyard_write=True) as conn, conn.begin():
        row = conn.execute(sa.select(JobRow.__table__).where(JobRow.id == template_id)).one()
        base = dict(row._mapping)
        rows = [
            {
                **base, "id": ids.new_id("job"), "number": base["number"] + n, "status": "succeeded",
                "create_time": base["create_time"] - dt.timedelta(seconds=n),
            }
            for n in range(1, count + 1)
        ]  # fmt: skip
        conn.execute(sa.insert(JobRow.__table__), rows)
    engine.dispose()


def list_jobs(target: str, member: str) -> list[float]:
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(target))
    md = [("authorization", f"Bearer {member}")]
    seconds, token = [], ""
    while True:
        began = time.perf_counter()
        page = stub.ListJobs(
            job_service_pb2.ListJobsRequest(page_size=100, page_token=token), metadata=md
        )
        seconds.append(time.perf_counter() - began)
        token = page.next_page_token
        if not token:
            return seconds


def create(stub: Any, md: list[tuple[str, str]], machine: str) -> str:
    body = struct_pb2.Struct()
    body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                 "resources": {"machines": [machine]}, "hyperparameters": {"max_steps": 1}})  # fmt: skip
    return str(stub.CreateJob(job_service_pb2.CreateJobRequest(body=body), metadata=md).id)


def wrk(url: str, headers: dict[str, str], seconds: int) -> tuple[float, str]:
    """Requests a second `wrk` gets from `url` in `seconds`, and a note of its latency and
    of answers that were not 2xx."""
    argv = [
        "wrk",
        "-t2",
        "-c64",
        f"-d{seconds}s",
        *(f"-H{k}: {v}" for k, v in headers.items()),
        url,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    latency = re.search(r"Latency\s+(\S+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    note = f"mean latency {latency.group(1) if latency else '?'}" + (
        f", {non2xx.group(1)} not 2xx" if non2xx else ""
    )
    return float(rate.group(1)) if rate else 0.0, note


def echo_p50(call: Any, calls: int) -> float:
    """The p50 of `calls` bare unary echo round trips, in milliseconds."""
    seconds = []
    for _ in range(calls):
        began = time.perf_counter()
        call(PAYLOAD)
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds) * 1000


def measure(
    database: str, executors: int, jobs: int, reporting: int, seconds: float, n: int
) -> None:
    replicas = 2 if database == "postgresql" else 1
    label = f"{database}, {replicas} replica{'s' if replicas > 1 else ''}"
    env = {"TRAINYARD_LOCAL_EXECUTOR": "0", "TRAINYARD_QUEUE_LIMIT": str(4 * reporting + 100)}
    if replicas > 1:
        env["TRAINYARD_REPLICAS"] = str(replicas)
    # Reported once the stack has stopped, so printing takes nothing from a measurement.
    figures: list[Figure] = []

    def figure(name: str, unit: str, runs: list[float], baseline: str, base_unit: str,
               base_runs: list[float], note: str = "") -> None:  # fmt: skip
        figures.append(
            Figure("scale", f"{name} [{label}]", unit, runs, baseline, base_unit, base_runs,
                   note=note)
        )  # fmt: skip

    with running(database, **env) as (ends, keys, config), echo_server() as (echo, echo_pid):
        target = f"127.0.0.1:{ends.gateway_port}"
        member = [("authorization", f"Bearer {keys['member']}")]
        stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(target))
        template = create(stub, member, "nowhere")
        began = time.perf_counter()
        seed(config.database_url, template, jobs)
        seeded = time.perf_counter() - began

        machines = [f"sim-{n:04d}" for n in range(executors)]
        reporters = set(machines[:reporting])
        ctx = multiprocessing.get_context("spawn")
        out, go = ctx.Queue(), ctx.Event()
        share = -(-executors // PROCESSES)
        sims = [
            ctx.Process(
                target=simulate,
                args=(
                    target,
                    keys["executor"],
                    machines[i : i + share],
                    reporters,
                    out,
                    go,
                    seconds,
                    n,
                ),
                daemon=True,
            )
            for i in range(0, executors, share)
        ]
        for sim in sims:
            sim.start()
        try:
            connected = 0
            while connected < executors:
                kind, count, _ = out.get(timeout=300)
                connected += count if kind == "connected" else 0
            print(f"[scale] {label}: seeded {jobs:,} jobs in {seeded:.1f} s; "
                  f"{executors:,} executors connected", flush=True)  # fmt: skip
            info = json.loads((config.run_dir / "stack.json").read_text())
            claims_rss = [
                rss_mb(int(pid)) for name, pid in info["pids"].items() if name.startswith("claims")
            ]
            bare_rss = asyncio.run(hold_streams(echo, echo_pid, executors))
            figure(f"ClaimService resident memory with {executors:,} streams", "MB", claims_rss,
                   f"bare grpc.aio server holding {executors:,} streams", "MB", [bare_rss],
                   "one run a replica")  # fmt: skip

            echo_call = grpc.insecure_channel(echo).unary_unary(ECHO)
            walks: list[list[float]] = []
            echoes = []
            for _ in range(n):
                echoes.append(echo_p50(echo_call, 100))
                walks.append(list_jobs(target, keys["member"]))
            p99 = statistics.median(pct(pages, 99) for pages in walks)
            figure(f"ListJobs, pages of 100 through {jobs:,} jobs (p50)", "ms",
                   [pct(pages, 50) for pages in walks], "bare unary echo round trip (p50)", "ms",
                   echoes, f"{len(walks[0])} pages a run; p99 {p99:.1f} ms")  # fmt: skip

            claims, commits, every = [], [], []
            free = iter(machines[reporting:])
            for _ in range(n):
                commits.append(1000 / commit_rate(config.database_url, seconds=1.0))
                latencies = []
                for machine in itertools.islice(free, CLAIMS):
                    started = time.time()
                    job_id = create(stub, member, machine)
                    while True:
                        kind, assigned, at = out.get(timeout=60)
                        if kind == "assigned" and assigned == job_id:
                            latencies.append(at - started)
                            break
                claims.append(pct(latencies, 50))
                every += latencies
            figure(f"claim latency with {executors:,} streams connected (p50)", "ms", claims,
                   "bare commit on the same store", "ms", commits,
                   f"{CLAIMS} jobs a run; p99 of all {pct(every, 99):.0f} ms")  # fmt: skip

            for machine in sorted(reporters):
                create(stub, member, machine)
            assigned = 0
            while assigned < reporting:
                kind, _, _ = out.get(timeout=120)
                assigned += kind == "assigned"
            rows = [BATCH * commit_rate(config.database_url, rows=BATCH) for _ in range(n)]
            go.set()
            windows = [0] * n
            for _ in range(reporting):
                kind, counts, _ = out.get(timeout=seconds * n + 120)
                while kind != "reported":
                    kind, counts, _ = out.get(timeout=seconds * n + 120)
                windows = [a + b for a, b in zip(windows, counts, strict=True)]
            figure(f"durable ingestion, {reporting} tasks reporting at once", "events/s",
                   [count / seconds for count in windows],
                   f"bare commits of {BATCH} rows on the same store", "rows/s", rows,
                   f"{BATCH} events a report; {sum(windows):,} events in {n} windows of "
                   f"{seconds:g} s")  # fmt: skip

            if shutil.which("wrk") is None:
                print("[scale] wrk is not installed (apt-get install wrk): no gateway figures")
            else:
                gateway(ends.gateway_url, keys["member"], n, figure)
        finally:
            for sim in sims:
                sim.terminate()
            for sim in sims:
                sim.join(10)
    with_queue_drained(out)
    for found in figures:
        report(found)


def gateway(url: str, member: str, n: int, figure: Any) -> None:
    """The gateway under `wrk`, `n` runs of each route in turn with a bare Envoy's."""
    routes = {
        "Envoy's own health answer": (f"{url}/healthz", {}),
        "REST GET /v1/train/models (to JobService)": (
            f"{url}/v1/train/models",
            {"Authorization": f"Bearer {member}"},
        ),
    }
    with envoy_direct() as bare_url:
        for what, (route, headers) in routes.items():
            notes: list[str] = []

            def load(
                route: str = route, headers: dict[str, str] = headers, notes: list[str] = notes
            ) -> float:
                rate, note = wrk(route, headers, WRK_SECONDS)
                notes.append(note)
                return rate

            rates, bares = paired(load, lambda: wrk(bare_url, {}, WRK_SECONDS)[0], n)
            figure(f"gateway, {what}, wrk -c64", "requests/s", rates,
                   "bare Envoy direct response, wrk -c64", "requests/s", bares,
                   "; ".join(notes))  # fmt: skip


def with_queue_drained(out: Any) -> None:
    """Empty what the simulators left, so the queue's feeder thread can end."""
    try:
        while True:
            out.get_nowait()
    except queue.Empty:
        return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--executors", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--reporting", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=4.0, help="one ingestion window")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for database in databases():
        measure(database, args.executors, args.jobs, args.reporting, args.seconds, args.runs)


if __name__ == "__main__":
    main()
