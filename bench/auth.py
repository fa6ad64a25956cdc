"""What reading a key on every call costs: the interceptor's `Authenticator.principal`,
which looks the key up by its unique `key_hash` index on each call (so a revoked key is
refused by the next one), beside a bare read unit of the same store (`SELECT 1`) in the
same run, on SQLite and, when TRAINYARD_TEST_DATABASE_URL names one, PostgreSQL.

    python bench/auth.py [--calls 2000] [--concurrency 1,16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stack import postgres_schema
from services.core import auth
from services.core.rpc import Authenticator
from services.core.store import Store, open_store


async def measure(
    call: Callable[[], Awaitable[object]], calls: int, concurrency: int
) -> list[float]:
    latencies: list[float] = []
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    for _ in range(50):  # warm-up: the pool's connections, the statement cache
        await call()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def line(name: str, latencies: list[float], seconds: float) -> str:
    p50 = statistics.median(latencies) * 1e6
    p99 = statistics.quantiles(latencies, n=100)[98] * 1e6
    return f"  {name:<28} {len(latencies) / seconds:8.0f}/s  p50 {p50:7.0f} µs  p99 {p99:7.0f} µs"


async def bench(store: Store, calls: int, levels: list[int]) -> None:
    with store.unit() as session:
        _, key = auth.create_key(session, org="bench", role="member")
    metadata = {"authorization": f"Bearer {key}"}
    authenticator = Authenticator(store)

    def bare() -> None:
        with store.unit(write=False) as session:
            session.execute(sa.text("SELECT 1"))

    paths: dict[str, Callable[[], Awaitable[object]]] = {
        "bare read unit (baseline)": lambda: asyncio.to_thread(bare),
        "key read per call": lambda: authenticator.principal(metadata),
    }
    for concurrency in levels:
        print(f" concurrency {concurrency}")
        figures = {}
        for name, call in paths.items():
            began = time.perf_counter()
            latencies = await measure(call, calls, concurrency)
            figures[name] = statistics.median(latencies)
            print(line(name, latencies, time.perf_counter() - began))
        ratio = figures["key read per call"] / figures["bare read unit (baseline)"]
        print(f"  key read ÷ baseline (p50)    {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    levels = [int(n) for n in args.concurrency.split(",")]
    with contextlib.ExitStack() as scope:
        sqlite_dir = scope.enter_context(tempfile.TemporaryDirectory())
        found = [("SQLite", f"sqlite:///{Path(sqlite_dir) / 'bench.db'}")]
        if url := os.environ.get("TRAINYARD_TEST_DATABASE_URL"):
            found.append(("PostgreSQL", scope.enter_context(postgres_schema(url))))
        for name, database in found:
            store = open_store(database)
            try:
                print(name)
                asyncio.run(bench(store, args.calls, levels))
            finally:
                store.dispose()


if __name__ == "__main__":
    main()
