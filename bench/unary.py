"""Unary RPC rate and latency: straight to JobService, and through Envoy (gRPC and REST),
measured in one run against one stack.

    python bench/unary.py [--seconds 5] [--concurrency 1,16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import grpc
import httpx

from bench.stack import running
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


async def run(endpoints, key: str, seconds: float, levels: list[int]) -> None:  # type: ignore[no-untyped-def]
    metadata = (("authorization", f"Bearer {key}"),)
    request = job_service_pb2.ListModelsRequest()
    direct = grpc.aio.insecure_channel(f"127.0.0.1:{endpoints.service_ports['jobs']}")
    gateway = grpc.aio.insecure_channel(f"127.0.0.1:{endpoints.gateway_port}")
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
    print(f"{'path':<16} {'conc':>5} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for concurrency in levels:
        for name, call in paths.items():
            rate, lat = await measure(call, seconds, concurrency)
            print(
                f"{name:<16} {concurrency:>5} {rate:>9.0f} {pct(lat, 50):>8.2f} {pct(lat, 99):>8.2f}"
            )
    await direct.close()
    await gateway.close()
    await rest.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    with running() as (endpoints, keys, _):
        levels = [int(c) for c in args.concurrency.split(",")]
        asyncio.run(run(endpoints, keys["member"], args.seconds, levels))


if __name__ == "__main__":
    main()
