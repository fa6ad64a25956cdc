"""The official `tinker` SDK through the Tinker wire against the same work in-process:
one training step (`forward_backward` on one datum of 32 tokens, then `optim_step`) on
`fixture-tiny-llm`, and sampling tokens a second (greedy, 32 new tokens). The in-process
figures run `executor.engines.lora.Engine` on the same base in this process; the ratio is
what the SDK, the gateway, the wire, the services, the store and the executor's stream add.

    python bench/tinker_sdk.py [--steps 30] [--warmup 5] [--samples 10]

It starts a stack of its own (SQLite; `--database postgresql` with
TRAINYARD_TEST_DATABASE_URL set) whose members create clients.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.clients import figures, timed

BASE = "fixture-tiny-llm"
RANK = 8
SEED = 0
IDS = [32 + (i * 7) % 90 for i in range(33)]
NEW_TOKENS = 32
LR = 1e-3


def in_process(steps: int, warmup: int, samples: int) -> tuple[list[float], list[float]]:
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
    return timed(step, steps, warmup), timed(lambda: engine.sample(sample), samples, 1)


def through_sdk(
    url: str, key: str, steps: int, warmup: int, samples: int
) -> tuple[list[float], list[float]]:
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

        stepped = timed(step, steps, warmup)
        saved = training.save_weights_for_sampler("bench").result()
        sampler = service.create_sampling_client(model_path=saved.path).result()
        params = types.SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0)
        prompt = types.ModelInput.from_ints(IDS[:8])
        sampled = timed(lambda: sampler.sample(prompt, 1, params).result(), samples, 1)
    return stepped, sampled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--database", default="sqlite", choices=("sqlite", "postgresql"))
    args = parser.parse_args()
    # In-process first, on a quiet machine.
    local_steps, local_samples = in_process(args.steps, args.warmup, args.samples)
    from bench.stack import running
    from infra.stack import ensure_key

    with running(args.database) as (ends, _, config):
        key = ensure_key(
            config, config.home / "tinker.key", org="bench", role="member", label="bench"
        )
        remote_steps, remote_samples = through_sdk(
            ends.gateway_url, f"tml-{key}", args.steps, args.warmup, args.samples
        )
    print(f"one step (forward_backward + optim_step), 1 datum x 32 tokens, {BASE}, "
          f"{args.steps} steps after {args.warmup} warm-ups; {args.database}")  # fmt: skip
    print(f"{'path':<20} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8}")
    for name, seconds in (("tinker SDK, gateway", remote_steps), ("in-process", local_steps)):
        p50, p90, mean = figures(seconds)
        print(f"{name:<20} {p50:>8.2f} {p90:>8.2f} {mean:>8.2f}")
    print(f"SDK / in-process: {figures(remote_steps)[0] / figures(local_steps)[0]:.2f}x (p50)")
    for name, seconds in (("tinker SDK, gateway", remote_samples), ("in-process", local_samples)):
        rate = NEW_TOKENS / statistics.median(seconds)
        print(f"sampling {name:<20} {rate:>8.1f} tokens/s ({NEW_TOKENS} new tokens, p50)")


if __name__ == "__main__":
    main()
