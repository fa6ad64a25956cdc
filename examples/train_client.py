"""Fine-tune a model interactively, Tinker's way, through a Trainyard stack.

Creates a training client on `fixture-tiny-llm`, samples greedily, trains 30 steps
(forward_backward on a few fixed sentences, then optim_step with Adam at lr 1e-2),
samples again, saves the adapter and deletes the client.

    make up                                                   # in another terminal
    export TRAINYARD_API_KEY=$(.venv/bin/trainyard admin create-key --org demo --role operator)
    .venv/bin/python examples/train_client.py [--org demo] [--steps 30]

The last line of the loss curve, `losses: [...]`, is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from trainyard.sdk import Client, TrainyardError, datum_from_text

BASE = "fixture-tiny-llm"
SENTENCES = [
    "the quick brown fox jumps over the lazy dog.",
    "a stitch in time saves nine.",
    "all that glitters is not gold.",
]
PROMPT = "the quick brown"
GREEDY = {"max_tokens": 16, "temperature": 0}
BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(BARS[round((v - low) / span * (len(BARS) - 1))] for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--org", default="demo", help="the org the client is for")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()

    with Client() as sdk:
        try:
            trainer = sdk.create_training_client(BASE, rank=8, seed=0, org=args.org)
        except TrainyardError as exc:
            print(f"could not create a training client: {exc}", file=sys.stderr)
            return 1
        print(f"client {trainer.id} on {BASE} (org {args.org})")
        try:
            before = trainer.sample(PROMPT, sampling_params=GREEDY).result()
            print(f"before: {PROMPT!r} -> {before.sequences[0].text!r}")

            batch = [datum_from_text(s) for s in SENTENCES]
            losses: list[float] = []
            for step in range(1, args.steps + 1):
                # Both calls go out at once; the engine applies them in order.
                fb = trainer.forward_backward(batch)
                opt = trainer.optim_step({"learning_rate": args.lr})
                loss = fb.result().loss
                opt.result()
                losses.append(loss)
                print(f"step {step:3d}/{args.steps}  loss {loss:.4f}", flush=True)

            print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}  {sparkline(losses)}")

            after = trainer.sample(PROMPT, sampling_params=GREEDY).result()
            print(f"after:  {PROMPT!r} -> {after.sequences[0].text!r}")

            saved = trainer.save_weights("demo-adapter").result()
            print(f"saved {saved.name}: sha256 {saved.sha256} ({int(saved.size)} bytes)")
            print("losses: " + json.dumps([round(v, 6) for v in losses]))
        except TrainyardError as exc:
            print(f"training failed: {exc}", file=sys.stderr)
            return 1
        finally:
            trainer.delete()
        print(f"deleted {trainer.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
