"""A training client's round trip: one small forward_backward (one datum of 32 tokens on
`fixture-tiny-llm`) through the gateway with the SDK, against the same call on the same
model in this process (`executor.engines.lora.Engine`) as its baseline, in one run; the
ratio is what the gateway, the services, the store and the executor's wire add to each
call. Each run's figure is the p50 of its calls. The in-process runs come first, on a
quiet machine: a stack stopping (its engines exiting) would take CPU from them.

    python bench/clients.py [--runs 5] [--calls 10] [--warmup 5]

It starts a stack of its own, unless TRAINYARD_URL is set: then it uses that one, with
an operator key in TRAINYARD_API_KEY acting in `--org`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from google.protobuf import json_format

from bench.figures import Figure, report
from trainyard.sdk import Client, TrainyardError, datum_from_tokens

BASE = "fixture-tiny-llm"
RANK = 8
SEED = 0
# 33 printable byte ids: 32 inputs, each predicting the next.
IDS = [32 + (i * 7) % 90 for i in range(33)]
DATUM = datum_from_tokens(IDS[:-1], IDS[1:])


def timed(call: Callable[[], Any], runs: int, calls: int, warmup: int) -> list[list[float]]:
    """`runs` runs of `calls` timed calls each (seconds), after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    out = []
    for _ in range(runs):
        run = []
        for _ in range(calls):
            started = time.perf_counter()
            call()
            run.append(time.perf_counter() - started)
        out.append(run)
    return out


def p50s(runs: list[list[float]]) -> list[float]:
    """Each run's p50, in milliseconds."""
    return [statistics.median(run) * 1000 for run in runs]


def spread(runs: list[list[float]]) -> str:
    """p90 and mean of every call of every run, in milliseconds."""
    ms = [s * 1000 for run in runs for s in run]
    p90 = statistics.quantiles(ms, n=10)[8] if len(ms) > 1 else ms[0]
    return f"all calls: p90 {p90:.2f} ms, mean {statistics.fmean(ms):.2f} ms"


@contextlib.contextmanager
def gateway(org: str) -> Iterator[tuple[str, str, str]]:
    """The gateway's URL, an operator key and the org it acts in: the given stack's, or
    a stack of this run's own."""
    if os.environ.get("TRAINYARD_URL"):
        yield os.environ["TRAINYARD_URL"], os.environ.get("TRAINYARD_API_KEY", ""), org
        return
    from bench.stack import running
    from infra.stack import ensure_key

    with running() as (endpoints, _, config):
        key = ensure_key(
            config, config.home / "operator.key", org="bench", role="operator", label="bench"
        )
        yield endpoints.gateway_url, key, "bench"


def through_gateway(
    url: str, key: str, org: str, runs: int, calls: int, warmup: int
) -> list[list[float]]:
    with Client(url, key) as sdk:
        deadline = time.monotonic() + 120
        while True:  # a stack just started: its executor may not have connected yet
            try:
                trainer = sdk.create_training_client(BASE, rank=RANK, seed=SEED, org=org)
                break
            except TrainyardError as exc:
                if exc.reason != "TRAINING_UNAVAILABLE" or time.monotonic() > deadline:
                    raise
                time.sleep(1)
        try:
            return timed(lambda: trainer.forward_backward([DATUM]).result(), runs, calls, warmup)
        finally:
            trainer.delete()


def in_process(runs: int, calls: int, warmup: int) -> list[list[float]]:
    from executor.engines.lora import Engine

    engine = Engine(BASE, {"rank": RANK}, SEED)
    body = {
        "data": [json_format.MessageToDict(DATUM, preserving_proto_field_name=True)],
        "loss_fn": "cross_entropy",
    }
    return timed(lambda: engine.forward_backward(body), runs, calls, warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="calls a run")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--org", default="demo", help="with TRAINYARD_URL: the client's org")
    args = parser.parse_args()
    local = in_process(args.runs, args.calls, args.warmup)
    with gateway(args.org) as (url, key, org):
        remote = through_gateway(url, key, org, args.runs, args.calls, args.warmup)
    tokens = len(DATUM.model_input.tokens)
    report(
        Figure(
            bench="clients",
            name=f"forward_backward via gateway, 1 datum x {tokens} tokens, {BASE} (p50)",
            unit="ms",
            runs=p50s(remote),
            baseline="the same call in-process",
            baseline_unit="ms",
            baseline_runs=p50s(local),
            note=f"{spread(remote)}; in-process {spread(local)}; {args.calls} calls a run",
        )
    )


if __name__ == "__main__":
    main()
