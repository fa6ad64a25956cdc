"""What reading a key on every call costs: the interceptor's `Authenticator.principal`,
which looks the key up by its unique `key_hash` index on each call (so a revoked key is
refused by the next one), beside a bare read unit of the same store (`SELECT 1`) in the
same run, on SQLite and, when TRAINYARD_TEST_DATABASE_URL names one, PostgreSQL. Each
figure is the p50 of a run's calls; the runs of the two are taken in turn.

    python bench/auth.py [--calls 1000] [--runs 5] [--concurrency 1,16]
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

from bench.figures import Figure, report
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


async def bench(database: str, store: Store, calls: int, n: int, levels: list[int]) -> None:
    with store.unit() as session:
        _, key = auth.create_key(session, org="bench", role="member")
    metadata = {"authorization": f"Bearer {key}"}
    authenticator = Authenticator(store)

    def bare() -> None:
        with store.unit(write=False) as session:
            session.execute(sa.text("SELECT 1"))

    for concurrency in levels:
        p50s: tuple[list[float], list[float]] = ([], [])
        p99s: list[float] = []
        for _ in range(n):
            baseline = await measure(lambda: asyncio.to_thread(bare), calls, concurrency)
            p50s[1].append(statistics.median(baseline) * 1e6)
            latencies = await measure(lambda: authenticator.principal(metadata), calls, concurrency)
            p50s[0].append(statistics.median(latencies) * 1e6)
            p99s.append(statistics.quantiles(latencies, n=100)[98] * 1e6)
        report(
            Figure(
                bench="auth",
                name=f"key read per call, {database}, concurrency {concurrency} (p50)",
                unit="µs",
                runs=p50s[0],
                baseline=f"bare read unit (SELECT 1), concurrency {concurrency}",
                baseline_unit="µs",
                baseline_runs=p50s[1],
                note=f"p99 {statistics.median(p99s):,.0f} µs; {calls} calls a run",
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls a run")
    parser.add_argument("--runs", type=int, default=5)
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
                asyncio.run(bench(name, store, args.calls, args.runs, levels))
            finally:
                store.dispose()


if __name__ == "__main__":
    main()
