"""What every benchmark prints: a figure beside the same machine's baseline, measured in
the same run, and the ratio between them, with the noise of N runs shown (min, median,
max), never hidden. A figure measured on one machine means little on another; its ratio
to a baseline the reader can measure anywhere (raw gRPC ping-pong, a bare commit loop on
the same store, the bare training loop) carries over.

Each `Figure` is printed as it is measured and, when `TRAINYARD_BENCH_TABLE` names a file,
appended to it as a JSON line, so `make bench` prints one table of every benchmark's
figures at the end (`python -m bench.figures FILE`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc

TABLE_ENV = "TRAINYARD_BENCH_TABLE"


@dataclasses.dataclass
class Spread:
    """N runs of one measurement."""

    runs: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def __str__(self) -> str:
        if len(self.runs) == 1:
            return _num(self.runs[0])
        return (
            f"{_num(self.median)} (min {_num(min(self.runs))}, max {_num(max(self.runs))}, "
            f"n={len(self.runs)})"
        )


@dataclasses.dataclass
class Figure:
    """One figure beside its baseline. `ratio` is figure ÷ baseline (medians); `goal`, when
    set, is a bound on the figure (`lower` True: at most `goal`, else at least)."""

    bench: str
    name: str
    unit: str
    runs: list[float]
    baseline: str
    baseline_unit: str
    baseline_runs: list[float]
    goal: float | None = None
    lower: bool = True
    note: str = ""

    @property
    def value(self) -> Spread:
        return Spread(self.runs)

    @property
    def base(self) -> Spread:
        return Spread(self.baseline_runs)

    @property
    def ratio(self) -> float:
        return self.value.median / self.base.median if self.base.median else float("nan")

    @property
    def verdict(self) -> str:
        if self.goal is None:
            return ""
        met = self.value.median <= self.goal if self.lower else self.value.median >= self.goal
        return f"goal {'≤' if self.lower else '≥'} {_num(self.goal)}: {'ok' if met else 'MISSED'}"

    def line(self) -> str:
        text = (
            f"{self.name}: {self.value} {self.unit} | baseline, {self.baseline}: {self.base} "
            f"{self.baseline_unit} | ratio {self.ratio:.3g}"
        )
        extra = "; ".join(part for part in (self.verdict, self.note) if part)
        return f"{text} | {extra}" if extra else text


def report(figure: Figure) -> None:
    """Print `figure` and add it to `make bench`'s table."""
    print(f"[{figure.bench}] {figure.line()}", flush=True)
    table = os.environ.get(TABLE_ENV)
    if table:
        with open(table, "a") as fh:
            fh.write(json.dumps(dataclasses.asdict(figure)) + "\n")


def runs(measure: Callable[[], float], n: int) -> list[float]:
    return [measure() for _ in range(n)]


def paired(
    figure: Callable[[], float], baseline: Callable[[], float], n: int
) -> tuple[list[float], list[float]]:
    """`n` runs of a figure and of its baseline, taken in turn (the baseline first), so drift
    on a shared machine falls on both alike."""
    found: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        found[1].append(baseline())
        found[0].append(figure())
    return found


# -- baselines ------------------------------------------------------------------------------

# The bare echo service's methods: a unary echo and a bidirectional one, bytes as sent.
ECHO = "/bench.Echo/Echo"
PING = "/bench.Echo/Ping"
PAYLOAD = b"x" * 256  # about a small request or one report
ECHO_COMMAND = "serve-echo"  # python -m bench.figures serve-echo: what `echo_server` runs


def _echo_handler() -> grpc.GenericRpcHandler:
    async def unary(request, context):  # type: ignore[no-untyped-def]
        return request

    async def stream(requests, context):  # type: ignore[no-untyped-def]
        async for item in requests:
            yield item

    return grpc.method_handlers_generic_handler(
        "bench.Echo",
        {
            "Echo": grpc.unary_unary_rpc_method_handler(unary),
            "Ping": grpc.stream_stream_rpc_method_handler(stream),
        },
    )


async def _serve_echo() -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_echo_handler(),))
    print(server.add_insecure_port("127.0.0.1:0"), flush=True)
    await server.start()
    await server.wait_for_termination()


@contextlib.contextmanager
def echo_server() -> Iterator[tuple[str, int]]:
    """A bare grpc.aio echo server in a process of its own, as each service runs, importing
    nothing else: its target and pid. A unary call to `ECHO` is the floor under any unary
    RPC on this machine; its memory holding streams of `PING`, the floor under a
    service's."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.figures", ECHO_COMMAND], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield f"127.0.0.1:{int(process.stdout.readline())}", process.pid
    finally:
        process.terminate()
        process.wait(10)


async def hold_streams(target: str, pid: int, streams: int) -> float:
    """The resident MB of the echo server `pid` at `target` while `streams` `PING` streams
    are open on it, each having echoed one message."""
    async with grpc.aio.insecure_channel(target) as channel:
        calls = [channel.stream_stream(PING)() for _ in range(streams)]
        for call in calls:
            await call.write(PAYLOAD)
        for call in calls:
            await call.read()
        held = rss_mb(pid)
        for call in calls:
            call.cancel()
    return held


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


async def _pingpong(seconds: float) -> float:
    """Messages a second, ping-pong on one stream against a bare grpc.aio echo handler
    (payload ~ a report)."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_echo_handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(PING)()
        count = 0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            await call.write(PAYLOAD)
            await call.read()
            count += 1
        await call.done_writing()
        rate = count / (time.perf_counter() - began)
    await server.stop(None)
    return rate


def pingpong_rate(seconds: float = 2.0) -> float:
    """Raw gRPC bidirectional ping-pong on this machine, messages a second."""
    return asyncio.run(_pingpong(seconds))


BASELINE_TABLE = "bench_bare_commits"


def commit_rate(database_url: str, seconds: float = 2.0, rows: int = 1) -> float:
    """A bare commit loop on the store at `database_url` (the stack's own engine settings:
    WAL and synchronous=NORMAL on SQLite): write transactions a second, each inserting
    `rows` rows, in a scratch table dropped after."""
    import sqlalchemy as sa

    from services.core.store import create_engine

    engine = create_engine(database_url)
    table = sa.Table(
        BASELINE_TABLE,
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("value", sa.Float),
    )
    # Every statement as a write unit (BEGIN IMMEDIATE on SQLite): the scratch table's
    # check-then-create, read then written, would otherwise fail at once beside a stack's
    # writers instead of queueing.
    write = engine.execution_options(trainyard_write=True)
    table.create(write, checkfirst=True)
    try:
        count = 0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            with write.begin() as conn:
                conn.execute(table.insert(), [{"value": 1.0}] * rows)
            count += 1
        return count / (time.perf_counter() - began)
    finally:
        table.drop(write)
        engine.dispose()


def s3_seconds(
    endpoint: str, access_key: str, secret_key: str, bucket: str, data: bytes
) -> tuple[float, float]:
    """A bare S3 PUT and GET of `data` (no SSE-C, no grant, no check) on the object store
    at `endpoint`, in seconds each; the object is deleted after."""
    from services.core import s3

    client = s3.client(endpoint, access_key, secret_key)
    key = f"_bench/{time.time_ns()}"
    began = time.perf_counter()
    client.put_object(Bucket=bucket, Key=key, Body=data)
    put = time.perf_counter() - began
    began = time.perf_counter()
    client.get_object(Bucket=bucket, Key=key)["Body"].read()
    got = time.perf_counter() - began
    client.delete_object(Bucket=bucket, Key=key)
    return put, got


_ENVOY_DIRECT = """\
static_resources:
  listeners:
  - address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: bench
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          route_config:
            virtual_hosts:
            - name: bench
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                direct_response: {{status: 200, body: {{inline_string: "ok"}}}}
"""


@contextlib.contextmanager
def envoy_direct() -> Iterator[str]:
    """A bare Envoy (the stack's binary, as many workers) answering every request itself
    with `200 ok`: its URL. What a native load generator gets from it is the most this
    machine's Envoy serves."""
    from infra.stack import _envoy_binary
    from trainyard.ports import free_port

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "envoy.yaml"
        config.write_text(_ENVOY_DIRECT.format(port=port))
        argv = [_envoy_binary(), "-c", str(config), "--disable-hot-restart", "-l", "error",
                "--concurrency", "2"]  # fmt: skip
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(url, timeout=1).read()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the bare Envoy did not start") from None
                    time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            process.wait(10)


# -- the table ------------------------------------------------------------------------------


def table(figures: Sequence[Figure]) -> str:
    header = (
        "bench",
        "figure",
        "median (min–max, n)",
        "baseline",
        "median (min–max, n)",
        "ratio",
        "goal",
    )
    rows = [header]
    for f in figures:
        rows.append(
            (
                f.bench,
                f.name,
                _cell(f.runs, f.unit),
                f.baseline,
                _cell(f.baseline_runs, f.baseline_unit),
                f"{f.ratio:.3g}",
                f.verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _cell(runs: list[float], unit: str) -> str:
    """A table's cell: the median, then the range and the count of runs when more than one."""
    found = f"{_num(statistics.median(runs))} {unit}"
    if len(runs) > 1:
        found += f" ({_num(min(runs))}–{_num(max(runs))}, {len(runs)})"
    return found


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def main() -> None:
    if sys.argv[1] == ECHO_COMMAND:
        asyncio.run(_serve_echo())
        return
    path = Path(sys.argv[1])
    figures = [Figure(**json.loads(line)) for line in path.read_text().splitlines() if line]
    print(table(figures))
    missed = [f for f in figures if f.verdict.endswith("MISSED")]
    if missed:
        print(f"{len(missed)} goal(s) missed: " + "; ".join(f"{f.bench} {f.name}" for f in missed))


if __name__ == "__main__":
    main()
