"""The official `tinker` SDK through the Tinker wire against the same work in-process:
one training step (`forward_backward` on one datum of 32 tokens, then `optim_step`) on
`fixture-tiny-llm`, and sampling tokens a second (greedy, 32 new tokens). The in-process
baselines run `executor.engines.lora.Engine` on the same base in this process, first, on a
quiet machine; the ratio is what the SDK, the gateway, the wire, the services, the store
and the executor's stream add. Each run's figure is the p50 of its calls.

    python bench/tinker_sdk.py [--runs 5] [--steps 10] [--warmup 5] [--samples 3]

It starts a stack of its own (SQLite; `--database postgresql` with
TRAINYARD_TEST_DATABASE_URL set) whose members create clients.
"""

from __future__ import annotations

import argparse
import time

from bench.clients import p50s, spread, timed
from bench.figures import Figure, report

BASE = "fixture-tiny-llm"
RANK = 8
SEED = 0
IDS = [32 + (i * 7) % 90 for i in range(33)]
NEW_TOKENS = 32
LR = 1e-3


Runs = list[list[float]]


def in_process(runs: int, steps: int, warmup: int, samples: int) -> tuple[Runs, Runs]:
    from executor.engines.lora import Engine

    engine = Engine(BASE, {"rank": RANK}, SEED)
    body = {
        "data": [
            {
                "model_input": {"tokens": IDS[:-1]},
                "loss_fn_inputs": {"target_tokens": IDS[1:], "weights": [1.0] * 32},
            }
        ],
        "loss_fn": "cross_entropy",
    }

    def step() -> None:
        engine.forward_backward(body)
        engine.optim_step({"adam_params": {"learning_rate": LR}})

    sample = {
        "prompt": {"tokens": IDS[:8]},
        "num_samples": 1,
        "sampling_params": {"max_tokens": NEW_TOKENS, "temperature": 0.0},
    }
    return (
        timed(step, runs, steps, warmup),
        timed(lambda: engine.sample(sample), runs, samples, 1),
    )


def through_sdk(
    url: str, key: str, runs: int, steps: int, warmup: int, samples: int
) -> tuple[Runs, Runs]:
    import tinker
    from tinker import types

    datum = types.Datum(
        model_input=types.ModelInput.from_ints(IDS[:-1]),
        loss_fn_inputs={"target_tokens": IDS[1:], "weights": [1.0] * 32},
    )
    adam = types.AdamParams(learning_rate=LR)
    with tinker.ServiceClient(base_url=url, api_key=key) as service:
        deadline = time.monotonic() + 120
        while True:  # a stack just started: its executor may not have connected yet
            try:
                training = service.create_lora_training_client(
                    base_model=BASE, rank=RANK, seed=SEED
                ).result()
                break
            except tinker.APIStatusError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

        def step() -> None:
            fwd = training.forward_backward([datum], "cross_entropy")
            opt = training.optim_step(adam)
            fwd.result()
            opt.result()

        stepped = timed(step, runs, steps, warmup)
        saved = training.save_weights_for_sampler("bench").result()
        sampler = service.create_sampling_client(model_path=saved.path).result()
        params = types.SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0)
        prompt = types.ModelInput.from_ints(IDS[:8])
        sampled = timed(lambda: sampler.sample(prompt, 1, params).result(), runs, samples, 1)
    return stepped, sampled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps a run")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--samples", type=int, default=3, help="samples a run")
    parser.add_argument("--database", default="sqlite", choices=("sqlite", "postgresql"))
    args = parser.parse_args()
    local_steps, local_samples = in_process(args.runs, args.steps, args.warmup, args.samples)
    from bench.stack import running
    from infra.stack import ensure_key

    with running(args.database) as (ends, _, config):
        key = ensure_key(
            config, config.home / "tinker.key", org="bench", role="member", label="bench"
        )
        remote_steps, remote_samples = through_sdk(
            ends.gateway_url, f"tml-{key}", args.runs, args.steps, args.warmup, args.samples
        )
    report(
        Figure(
            bench="tinker_sdk",
            name=f"step (forward_backward + optim_step), 1 datum x 32 tokens, {args.database} (p50)",
            unit="ms",
            runs=p50s(remote_steps),
            baseline="the same step in-process",
            baseline_unit="ms",
            baseline_runs=p50s(local_steps),
            note=f"{spread(remote_steps)}; in-process {spread(local_steps)}; "
            f"{args.steps} steps a run",
        )
    )

    def rates(runs: Runs) -> list[float]:
        return [NEW_TOKENS * 1000 / ms for ms in p50s(runs)]

    report(
        Figure(
            bench="tinker_sdk",
            name=f"sampling, greedy, {NEW_TOKENS} new tokens, {args.database} (p50)",
            unit="tokens/s",
            runs=rates(remote_samples),
            baseline="the same sampling in-process",
            baseline_unit="tokens/s",
            baseline_runs=rates(local_samples),
            note=f"{args.samples} samples a run",
        )
    )


if __name__ == "__main__":
    main()
