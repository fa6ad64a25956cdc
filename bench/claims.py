"""The executor wire's figures, on one stack a database (SQLite, and PostgreSQL when
named), each beside a baseline measured in the same run, N runs of each:

- claim latency: a job created over gRPC to the assignment an idle, connected executor
  receives (p50, p99), preparation included, beside a raw gRPC ping-pong's round trip;
  on a second stack with the trace on (services/core/trace.py), where the time goes, hop
  by hop, and how many statements the stack's processes sent to the database during each;
- the event long-poll's wake-up: an event recorded to the answer in a watcher's hand;
- durable report ingestion: metric events per second, each batch acknowledged only
  after it is committed, on a task the platform runs (metered by the clock and charged
  to its org's wallet in each report's transaction) beside the same task with its hold
  removed, so no report meters, and a bare commit loop writing as many rows a commit on
  the same store; where a report's time goes.

    python bench/claims.py [--jobs 30] [--seconds 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import queue
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import sqlalchemy as sa
from google.protobuf import struct_pb2

from bench import figures
from bench.stack import databases, running
from services.core.store import create_engine
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

SUPPORTS = task_pb2.Supports(adaptations=["full"], outputs=["checkpoint"])
# Reports sent and not yet acknowledged, at most (the executor sends without waiting).
IN_FLIGHT = 8
# Events a report carries.
REPORT_EVENTS = 500
# More events a second than a run could ingest: the reports built ahead of the clock.
MOST_PER_SECOND = 100_000


def pct(values: list[float], q: int) -> float:
    return (
        statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else values[0] * 1000
    )


def connect(target: str, key: str, slots: int, platform: bool = False):  # type: ignore[no-untyped-def]
    outbox: queue.Queue[claim_service_pb2.ConnectRequest | None] = queue.Queue()
    hello = claim_service_pb2.Hello(
        machine="bench", platform=platform, bases=["fixture-tiny-llm"], devices=["cpu"],
        supports=SUPPORTS, slots=slots,
    )  # fmt: skip

    def requests():  # type: ignore[no-untyped-def]
        yield claim_service_pb2.ConnectRequest(hello=hello)
        while (item := outbox.get()) is not None:
            yield item

    stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(target))
    call = stub.Connect(requests(), metadata=[("authorization", f"Bearer {key}")])
    assert next(call).WhichOneof("kind") == "welcome"
    return call, outbox


def claim_latency(
    target: str, member: str, executor: str, jobs: int
) -> tuple[list[float], list[dict[str, Any]]]:
    """Seconds from each create sent to its assignment received by an idle executor, and
    the client's two ends of each (wall clock, to line up with the trace). The executor
    says each task it receives was cancelled, and the next job is created once that is
    acknowledged: each finds the executor idle, as a job that waits for none would."""
    call, outbox = connect(target, executor, slots=1)
    arrivals: dict[str, float] = {}
    idle = threading.Event()

    def listen() -> None:
        with contextlib.suppress(grpc.RpcError):  # the stream cancelled once all arrived
            for message in call:
                kind = message.WhichOneof("kind")
                if kind == "assignment":
                    arrivals[message.assignment.job.id] = time.time()
                    task = message.assignment.task
                    cancelled = task_pb2.TaskEvent(seq=1, type="status", status="cancelled")
                    report = claim_service_pb2.StreamReport(
                        task=task.id, lease=task.lease, events=[cancelled]
                    )
                    outbox.put(claim_service_pb2.ConnectRequest(report=report))
                elif kind == "ack":
                    idle.set()

    threading.Thread(target=listen, daemon=True).start()
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(target))
    md = [("authorization", f"Bearer {member}")]
    created: dict[str, float] = {}
    for _ in range(jobs):
        body = struct_pb2.Struct()
        body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                     "resources": {"machines": ["bench"]}, "hyperparameters": {"max_steps": 1}})  # fmt: skip
        idle.clear()
        started = time.time()
        job = stub.CreateJob(job_service_pb2.CreateJobRequest(body=body), metadata=md)
        created[job.id] = started
        if not idle.wait(60):
            raise TimeoutError(f"no assignment came for {job.id} within 60 s")
    outbox.put(None)
    call.cancel()
    ends = [{"job": j, "sent": created[j], "received": arrivals[j]} for j in created]
    return [arrivals[j] - created[j] for j in created], ends


# A job's way from create to assignment, hop by hop: each hop's trace line (services/core/
# trace.py) is the job's own, or, for a hop that names no job, the first of its kind after
# the hop before (the benchmark's jobs go one at a time).
CLAIM_HOPS = (
    ("create.received", "create reached JobService (client, Envoy, key read)"),
    ("preparation.started", "admitted, inserted, taken for preparation (its unit)"),
    ("wakeup.sent", "snapshot verified, task open, committed, wake-up sent"),
    ("wakeup.received", "wake-up received by ClaimService"),
    ("claim.pass", "claim pass started (stream woken)"),
    ("claim.committed", "claim committed (lease, hold, audit)"),
    ("assignment.sent", "assignment sent to the stream"),
    ("received", "assignment received (Envoy, client)"),
)


def claim_breakdown(
    ends: list[dict[str, Any]], lines: list[dict[str, Any]]
) -> dict[str, list[float]]:
    """Seconds each hop took, by hop, over the jobs of `ends`."""
    claims_pids = {line["pid"] for line in lines if line["hop"] == "claim.pass"}
    counted = any(line["hop"] == "sql" for line in lines)
    spans: dict[str, list[float]] = {name: [] for name, _ in CLAIM_HOPS}
    for end in ends:
        job, at = str(end["job"]), end["sent"]
        for name, _ in CLAIM_HOPS:
            if name == "received":
                t = end["received"]
            else:
                t = next(
                    (
                        line["t"]
                        for line in lines
                        if line["hop"] == name
                        and line["t"] >= at
                        and line.get("job", job) == job
                        and (not name.startswith("wakeup") or _claimable(line))
                        and (name != "wakeup.received" or line["pid"] in claims_pids)
                        and (name != "claim.pass" or line["pid"] in claims_pids)
                    ),
                    float("nan"),
                )
            if t != t:  # no such line: the hop's clock starts again at the next found
                continue
            spans[name].append(t - at)
            if counted:
                sent = sum(1 for line in lines if line["hop"] == "sql" and at < line["t"] <= t)
                spans.setdefault(f"{name}.statements", []).append(sent)
            at = t
    return spans


def _claimable(line: dict[str, Any]) -> bool:
    return any(str(topic).startswith("tasks:") for topic in line.get("topics", ()))


def read_trace(path: Path) -> list[dict[str, Any]]:
    # The stack's processes go on writing: a last line may be half written.
    whole = path.read_text().split("\n")[:-1]
    lines = [json.loads(text) for text in whole if text]
    return sorted(lines, key=lambda line: line["t"])


def ingestion(
    target: str, member: str, platform: str, seconds: float, database_url: str, *, metered: bool
) -> tuple[float, int, str]:
    """Events per second reported on one platform task; `metered` False removes its hold
    first, so its reports meter and charge nothing."""
    call, outbox = connect(target, platform, slots=1, platform=True)
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(target))
    body = struct_pb2.Struct()
    body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                 "resources": {"budget": 100}})  # fmt: skip
    stub.CreateJob(
        job_service_pb2.CreateJobRequest(body=body),
        metadata=[("authorization", f"Bearer {member}")],
    )
    assignment = next(m for m in call if m.WhichOneof("kind") == "assignment").assignment
    if not metered:
        engine = create_engine(database_url)
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM holds WHERE task_id = :t"), {"t": assignment.task.id})
        engine.dispose()
    # As the executor does, reports go out without waiting for the last one's ack, a
    # few in flight; an event counts once its ack (sent after its commit) came back. The
    # reports are built before the clock starts, so the figure is the service's, not the
    # cost of making protobufs on the same two cores.
    batch = REPORT_EVENTS
    reports = [
        claim_service_pb2.ConnectRequest(
            report=claim_service_pb2.StreamReport(
                task=assignment.task.id,
                lease=assignment.task.lease,
                events=[
                    task_pb2.TaskEvent(seq=seq, type="metric", name="loss", step=seq, value=1.0)
                    for seq in range(first, first + batch)
                ],
            )
        )
        for first in range(1, int(seconds * MOST_PER_SECOND) + 1, batch)
    ]
    acked, in_flight = 0, 0

    def read_ack() -> int:
        ack = next(m for m in call if m.WhichOneof("kind") == "ack").ack
        assert not ack.reason, ack.reason
        return ack.seq

    began = time.perf_counter()
    for report in reports:
        if time.perf_counter() - began >= seconds:
            break
        if in_flight == IN_FLIGHT:
            acked, in_flight = read_ack(), in_flight - 1
        outbox.put(report)
        in_flight += 1
    while in_flight:
        acked, in_flight = read_ack(), in_flight - 1
    elapsed = time.perf_counter() - began
    outbox.put(None)
    call.cancel()
    return acked / elapsed, acked, assignment.task.id


def wakeup_latency(target: str, member: str, platform: str, rounds: int) -> list[float]:
    """Seconds from a metric event's creation, in its report's transaction, to the answer
    of an event long-poll that waited for it (through the gateway, like a watching CLI)."""
    call, outbox = connect(target, platform, slots=1, platform=True)
    jobs = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(target))
    md = [("authorization", f"Bearer {member}")]
    body = struct_pb2.Struct()
    body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                 "resources": {"budget": 100}})  # fmt: skip
    job = jobs.CreateJob(job_service_pb2.CreateJobRequest(body=body), metadata=md)
    task = next(m for m in call if m.WhichOneof("kind") == "assignment").assignment.task
    after = jobs.ListJobEvents(job_service_pb2.ListJobEventsRequest(id=job.id), metadata=md)
    last = after.next_after

    def poll(after: int) -> tuple[float, job_service_pb2.ListJobEventsResponse]:
        request = job_service_pb2.ListJobEventsRequest(id=job.id, after=after, wait=25)
        found = jobs.ListJobEvents(request, metadata=md)
        return time.time(), found

    latencies = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        for step in range(1, rounds + 1):
            waiting = pool.submit(poll, last)
            time.sleep(0.05)  # the long poll is waiting by now
            event = task_pb2.TaskEvent(seq=step, type="metric", name="loss", step=step, value=1.0)
            report = claim_service_pb2.StreamReport(task=task.id, lease=task.lease, events=[event])
            outbox.put(claim_service_pb2.ConnectRequest(report=report))
            next(m for m in call if m.WhichOneof("kind") == "ack")
            received, found = waiting.result()
            latencies.append(received - found.events[0].create_time.ToDatetime().timestamp())
            last = found.next_after
    outbox.put(None)
    call.cancel()
    return latencies


# A commit of a stream's reports (those that waited while one was applied go together),
# part by part; "reports" counts the reports it took in.
REPORT_HOPS = (
    ("report.received", "first report received → the commit's thread starts"),
    ("report.applying", "parse the events"),
    ("report.parsed", "apply and commit (lease, meter, points, events)"),
    ("report.committed", "committed → first ack sent"),
    ("reports", "reports a commit"),
)


def report_breakdown(task: str, lines: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Seconds each part of a commit of `task`'s reports took, by part, and how many
    reports each took in (a stream applies its reports in order, one commit at a time)."""
    spans: dict[str, list[float]] = {name: [] for name, _ in REPORT_HOPS}
    waiting: list[float] = []  # reports received and not yet taken into a commit
    commit: dict[str, float] = {}
    for line in lines:
        if line.get("task") != task:
            continue
        hop, t = line["hop"], line["t"]
        if hop == "report.received":
            waiting.append(t)
        elif hop == "report.applying" and waiting:
            spans["report.received"].append(t - waiting[0])
            spans["reports"].append(len(waiting))
            waiting, commit = [], {hop: t}
        elif hop in ("report.parsed", "report.committed") and commit:
            before = "report.applying" if hop == "report.parsed" else "report.parsed"
            if before in commit:
                spans[before].append(t - commit[before])
            commit[hop] = t
        elif hop == "ack.sent" and "report.committed" in commit:
            spans["report.committed"].append(t - commit.pop("report.committed"))
    return spans


def print_breakdown(
    title: str, hops: tuple[tuple[str, str], ...], spans: dict[str, list[float]]
) -> None:
    """Each hop's p50 and p99, and the median of the statements sent during it by any
    process (where counted)."""
    print(f"  {title}")
    print(f"    {'hop':<62} {'p50 ms':>7} {'p99 ms':>7} {'stmts':>5}")
    for name, label in hops:
        values = spans.get(name)
        statements = spans.get(f"{name}.statements")
        sent = f"{statistics.median(statements):>5.0f}" if statements else ""
        if values and name == "reports":  # a count, not seconds
            low, high = statistics.median(values), max(values)
            print(f"    {label + ' (median, most)':<62} {low:>7.0f} {high:>7.0f}")
        elif label and values:
            print(f"    {label:<62} {pct(values, 50):>7.2f} {pct(values, 99):>7.2f} {sent}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=30, help="jobs a run of claim latency")
    parser.add_argument("--seconds", type=float, default=3.0, help="a run of ingestion")
    parser.add_argument("--runs", type=int, default=3, help="runs of each figure and baseline")
    args = parser.parse_args()
    for database in databases():
        measure(database, args.jobs, args.seconds, args.runs)


def measure(database: str, jobs: int, seconds: float, runs: int) -> None:
    # The figures on a stack as it is deployed; the breakdowns on another with the trace on,
    # whose lines (one a statement) cost its processes time the figures leave out.
    with running(database, TRAINYARD_LOCAL_EXECUTOR="0") as (ends, keys, config):
        target = f"127.0.0.1:{ends.gateway_port}"
        # The first jobs after start-up open the services' connections: not counted.
        claim_latency(target, keys["member"], keys["executor"], 3)
        p50s, p99s = [], []
        for _ in range(runs):
            try:
                latencies, _ = claim_latency(target, keys["member"], keys["executor"], jobs)
            except TimeoutError:
                log = (config.home / "stack.log").read_text().splitlines()
                print("\n".join(line for line in log if '"ERROR"' in line or "Error" in line))
                raise
            p50s.append(pct(latencies, 50))
            p99s.append(pct(latencies, 99))
        wakeups = [
            pct(wakeup_latency(target, keys["member"], keys["platform"], jobs), 50)
            for _ in range(runs)
        ]
        rates: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(runs):
            for metered in (True, False):
                rate, _, _ = ingestion(
                    target, keys["member"], keys["platform"], seconds, config.database_url,
                    metered=metered,
                )  # fmt: skip
                rates[metered].append(rate)
        # The baselines, on the same machine and store, the stack idle beside them.
        pingpong = [1000 / figures.pingpong_rate(2.0) for _ in range(runs)]
        commits = [
            REPORT_EVENTS * figures.commit_rate(config.database_url, 2.0, REPORT_EVENTS)
            for _ in range(runs)
        ]
    with (
        tempfile.TemporaryDirectory() as scratch,
        running(
            database, TRAINYARD_LOCAL_EXECUTOR="0", TRAINYARD_TRACE=f"{scratch}/trace.jsonl"
        ) as (ends, keys, config),
    ):
        target = f"127.0.0.1:{ends.gateway_port}"
        trace = Path(scratch) / "trace.jsonl"
        claim_latency(target, keys["member"], keys["executor"], 3)
        spans: dict[str, list[float]] = {}
        traced: list[float] = []
        for _ in range(runs):
            latencies, client_ends = claim_latency(target, keys["member"], keys["executor"], jobs)
            traced.append(pct(latencies, 50))
            for name, values in claim_breakdown(client_ends, read_trace(trace)).items():
                spans.setdefault(name, []).extend(values)
        report_spans: dict[str, list[float]] = {}
        for _ in range(runs):
            _, _, task = ingestion(
                target, keys["member"], keys["platform"], seconds, config.database_url,
                metered=True,
            )  # fmt: skip
            for name, values in report_breakdown(task, read_trace(trace)).items():
                report_spans.setdefault(name, []).extend(values)
    roundtrip = "raw gRPC bidi ping-pong round trip"
    for name, values, goal in (
        ("claim latency p50", p50s, 15.0),
        ("claim latency p99", p99s, 40.0),
    ):
        figures.report(
            figures.Figure(
                "claims", f"{name} [{database}]", "ms", values, roundtrip, "ms", pingpong,
                goal=goal, note=f"create → assignment, {jobs} jobs a run, through Envoy",
            )
        )  # fmt: skip
    print_breakdown(
        f"[{database}] where a claim's time goes (traced: p50 {statistics.median(traced):.1f} ms)",
        CLAIM_HOPS,
        spans,
    )
    figures.report(
        figures.Figure(
            "claims", f"event long-poll wake-up p50 [{database}]", "ms", wakeups, roundtrip, "ms",
            pingpong, note="event recorded → long-poll answer in hand",
        )
    )  # fmt: skip
    bare = f"bare commit loop, {REPORT_EVENTS} rows a commit"
    figures.report(
        figures.Figure(
            "claims", f"durable ingestion, metered [{database}]", "events/s", rates[True], bare,
            "rows/s", commits, goal=50_000, lower=False,
            note=f"{REPORT_EVENTS} a report, {IN_FLIGHT} in flight, acked after commit",
        )
    )  # fmt: skip
    figures.report(
        figures.Figure(
            "claims", f"durable ingestion, unmetered [{database}]", "events/s", rates[False],
            bare, "rows/s", commits,
        )
    )  # fmt: skip
    print_breakdown(f"[{database}] where a report's time goes (metered)", REPORT_HOPS, report_spans)


if __name__ == "__main__":
    main()
