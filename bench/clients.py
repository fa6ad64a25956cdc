"""A training client's round trip: one small forward_backward (one datum of 32 tokens on
`fixture-tiny-llm`) through the gateway with the SDK, against the same call on the same
model in this process (`executor.engines.lora.Engine`), in one run; the ratio is what the
gateway, the services, the store and the executor's wire add to each call.

    python bench/clients.py [--calls 50] [--warmup 5]

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

from trainyard.sdk import Client, TrainyardError, datum_from_tokens

BASE = "fixture-tiny-llm"
RANK = 8
SEED = 0
# 33 printable byte ids: 32 inputs, each predicting the next.
IDS = [32 + (i * 7) % 90 for i in range(33)]
DATUM = datum_from_tokens(IDS[:-1], IDS[1:])


def figures(seconds: list[float]) -> tuple[float, float, float]:
    """p50, p90 and mean, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    p90 = statistics.quantiles(ms, n=10)[8] if len(ms) > 1 else ms[0]
    return statistics.median(ms), p90, statistics.fmean(ms)


def timed(call: Callable[[], Any], calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


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


def through_gateway(url: str, key: str, org: str, calls: int, warmup: int) -> list[float]:
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
            return timed(lambda: trainer.forward_backward([DATUM]).result(), calls, warmup)
        finally:
            trainer.delete()


def in_process(calls: int, warmup: int) -> list[float]:
    from executor.engines.lora import Engine

    engine = Engine(BASE, {"rank": RANK}, SEED)
    body = {
        "data": [json_format.MessageToDict(DATUM, preserving_proto_field_name=True)],
        "loss_fn": "cross_entropy",
    }
    return timed(lambda: engine.forward_backward(body), calls, warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--org", default="demo", help="with TRAINYARD_URL: the client's org")
    args = parser.parse_args()
    # In-process first, on a quiet machine: a stack stopping (its engines exiting) would
    # take CPU from it.
    local = in_process(args.calls, args.warmup)
    with gateway(args.org) as (url, key, org):
        remote = through_gateway(url, key, org, args.calls, args.warmup)
    print(f"forward_backward, 1 datum x {len(DATUM.model_input.tokens)} tokens, {BASE}, "
          f"{args.calls} calls after {args.warmup} warm-ups")  # fmt: skip
    print(f"{'path':<16} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8}")
    for name, seconds in (("via gateway", remote), ("in-process", local)):
        p50, p90, mean = figures(seconds)
        print(f"{name:<16} {p50:>8.2f} {p90:>8.2f} {mean:>8.2f}")
    ratio = figures(remote)[0] / figures(local)[0]
    print(f"gateway / in-process: {ratio:.1f}x (p50)")


if __name__ == "__main__":
    main()
