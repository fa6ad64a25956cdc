"""Unary RPC rate and latency: straight to JobService, and through Envoy (gRPC and REST),
measured in one run against one stack, each beside a bare grpc.aio unary echo served by a
process of its own (the floor under any unary call on this machine) at the same
concurrency, the runs of each path taken in turn with the echo's.

    python bench/unary.py [--seconds 2] [--runs 3] [--concurrency 1,16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import grpc
import httpx

from bench.figures import ECHO, PAYLOAD, Figure, echo_server, report
from bench.stack import running
from infra.stack import Endpoints
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc


async def measure(
    call: Callable[[], Awaitable[object]], seconds: float, concurrency: int
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    for _ in range(20):  # warm-up
        await call()
    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(latencies) / (time.perf_counter() - began), latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


async def run(
    endpoints: Endpoints, key: str, echo: str, seconds: float, n: int, levels: list[int]
) -> None:
    metadata = (("authorization", f"Bearer {key}"),)
    request = job_service_pb2.ListModelsRequest()
    direct = grpc.aio.insecure_channel(f"127.0.0.1:{endpoints.service_ports['jobs']}")
    gateway = grpc.aio.insecure_channel(f"127.0.0.1:{endpoints.gateway_port}")
    bare = grpc.aio.insecure_channel(echo)
    rest = httpx.AsyncClient(
        base_url=endpoints.gateway_url, headers={"authorization": f"Bearer {key}"}
    )
    paths: dict[str, Callable[[], Awaitable[object]]] = {
        "gRPC direct": lambda: job_service_pb2_grpc.JobServiceStub(direct).ListModels(
            request, metadata=metadata
        ),
        "gRPC via Envoy": lambda: job_service_pb2_grpc.JobServiceStub(gateway).ListModels(
            request, metadata=metadata
        ),
        "REST via Envoy": lambda: rest.get("/v1/train/models"),
    }
    echo_call = bare.unary_unary(ECHO)
    for concurrency in levels:
        for name, call in paths.items():
            rates, echo_rates, p50s, p99s = [], [], [], []
            for _ in range(n):
                echo_rates.append(
                    (await measure(lambda: echo_call(PAYLOAD), seconds, concurrency))[0]
                )
                rate, lat = await measure(call, seconds, concurrency)
                rates.append(rate)
                p50s.append(pct(lat, 50))
                p99s.append(pct(lat, 99))
            report(
                Figure(
                    bench="unary",
                    name=f"ListModels, {name}, concurrency {concurrency}",
                    unit="calls/s",
                    runs=rates,
                    baseline=f"bare unary echo, concurrency {concurrency}",
                    baseline_unit="calls/s",
                    baseline_runs=echo_rates,
                    note=f"p50 {statistics.median(p50s):.2f} ms, p99 {statistics.median(p99s):.2f} ms",
                )
            )
    await direct.close()
    await gateway.close()
    await bare.close()
    await rest.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="one run's length")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    with running() as (endpoints, keys, _), echo_server() as (echo, _):
        levels = [int(c) for c in args.concurrency.split(",")]
        asyncio.run(run(endpoints, keys["member"], echo, args.seconds, args.runs, levels))


if __name__ == "__main__":
    main()
