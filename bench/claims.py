"""The executor wire's figures, in one run against one stack:

- claim latency: a job created over gRPC to the assignment an idle, connected executor
  receives (p50, p99), preparation included;
- durable report ingestion: metric events per second, each batch acknowledged only
  after it is committed, on a task the platform runs (metered by the clock and charged
  to its org's wallet in each report's transaction) beside the same task with its hold
  removed, so no report meters (the ratio is metering's cost);
- beside them, a raw gRPC bidirectional ping-pong on the same machine, for scale.

    python bench/claims.py [--jobs 30] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import queue
import statistics
import threading
import time

import grpc
import sqlalchemy as sa
from google.protobuf import struct_pb2

from bench.stack import databases, running
from services.core.store import create_engine
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

SUPPORTS = task_pb2.Supports(adaptations=["full"], outputs=["checkpoint"])
# Reports sent and not yet acknowledged, at most (the executor sends without waiting).
IN_FLIGHT = 4
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


def claim_latency(target: str, member: str, executor: str, jobs: int) -> list[float]:
    call, outbox = connect(target, executor, slots=jobs + 1)
    arrivals: dict[str, float] = {}
    done = threading.Event()

    def listen() -> None:
        with contextlib.suppress(grpc.RpcError):  # the stream cancelled once all arrived
            for message in call:
                if message.WhichOneof("kind") == "assignment":
                    arrivals[message.assignment.job.id] = time.perf_counter()
                    if len(arrivals) >= jobs:
                        done.set()

    threading.Thread(target=listen, daemon=True).start()
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(target))
    md = [("authorization", f"Bearer {member}")]
    created: dict[str, float] = {}
    for _ in range(jobs):
        body = struct_pb2.Struct()
        body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                     "resources": {"machines": ["bench"]}, "hyperparameters": {"max_steps": 1}})  # fmt: skip
        started = time.perf_counter()
        job = stub.CreateJob(job_service_pb2.CreateJobRequest(body=body), metadata=md)
        created[job.id] = started
        while job.id not in arrivals:
            time.sleep(0.001)
    done.wait(60)
    outbox.put(None)
    call.cancel()
    # The first job after start-up opens the services' connections; it is not counted.
    first = next(iter(created))
    return [arrivals[j] - created[j] for j in created if j != first]


def ingestion(
    target: str, member: str, platform: str, seconds: float, database_url: str, *, metered: bool
) -> tuple[float, int]:
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
    batch = 500
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
    return acked / elapsed, acked


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


async def raw_bidi(seconds: float) -> float:
    """Ping-pong on one stream against a bare grpc.aio echo handler, payload ~ a report."""

    async def echo(requests, context):  # type: ignore[no-untyped-def]
        async for item in requests:
            yield item

    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Ping": grpc.stream_stream_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream("/bench.Echo/Ping")()
        payload, count = b"x" * 256, 0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            await call.write(payload)
            await call.read()
            count += 1
        await call.done_writing()
        rate = count / (time.perf_counter() - began)
    await server.stop(None)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    for database in databases():
        measure(database, args.jobs, args.seconds)
    raw = asyncio.run(raw_bidi(args.seconds))
    print(f"raw gRPC bidi ping-pong on this machine: {raw:,.0f} messages/s")


def measure(database: str, jobs: int, seconds: float) -> None:
    with running(database, TRAINYARD_LOCAL_EXECUTOR="0") as (ends, keys, config):
        target = f"127.0.0.1:{ends.gateway_port}"
        latencies = claim_latency(target, keys["member"], keys["executor"], jobs + 1)
        wakeups = wakeup_latency(target, keys["member"], keys["platform"], jobs)
        rates = {
            metered: ingestion(
                target, keys["member"], keys["platform"], seconds, config.database_url,
                metered=metered,
            )
            for metered in (True, False)
        }  # fmt: skip
    print(
        f"[{database}] claim latency through the gateway, create → assignment ({jobs} jobs "
        f"after a first, uncounted): p50 {pct(latencies, 50):.0f} ms, "
        f"p99 {pct(latencies, 99):.0f} ms"
    )
    print(
        f"[{database}] event long-poll wake-up, event recorded → answer in hand ({jobs}): "
        f"p50 {pct(wakeups, 50):.1f} ms, p99 {pct(wakeups, 99):.1f} ms"
    )
    (metered, events), (bare, _) = rates[True], rates[False]
    print(
        f"[{database}] durable report ingestion: {metered:,.0f} events/s metered and charged "
        f"({events} events, 500 a report, {IN_FLIGHT} in flight, acked after commit); "
        f"{bare:,.0f} events/s without metering; ratio {metered / bare:.2f}"
    )


if __name__ == "__main__":
    main()
