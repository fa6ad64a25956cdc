"""Supervised fine-tuning with the official `tinker` SDK, unchanged, against Trainyard.

Point the SDK at the gateway with two environment variables and run it:

    export TINKER_BASE_URL=http://127.0.0.1:8080
    export TINKER_API_KEY=$(.venv/bin/trainyard admin create-key --org demo --role member --tinker)
    .venv/bin/python examples/tinker_sl.py            # --base fixture-tiny-llm --steps 20

Nothing below names Trainyard: it is the SDK's documented loop. It creates a LoRA
training client, loads the base's tokenizer (offline: the server names a directory it
wrote), trains `--steps` rounds of `forward_backward` + `optim_step` on a few sentences
(submitting each round's two calls before waiting on either), saves weights for a
sampler, samples from them, and lists the run and its checkpoints. Its last line is the
loss curve as JSON, `{"losses": [...]}`; it exits 0 when the loss fell.
"""

from __future__ import annotations

import argparse
import json
import sys

import tinker
from tinker import types

SENTENCES = [
    "the quick brown fox jumps over the lazy dog. ",
    "a stitch in time saves nine. ",
    "all that glitters is not gold. ",
]


def datum(tokenizer: object, text: str) -> types.Datum:
    ids = tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
    return types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="fixture-tiny-llm")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=4e-3)
    args = parser.parse_args()

    with tinker.ServiceClient() as service:
        training = service.create_lora_training_client(base_model=args.base, rank=8).result()
        tokenizer = training.get_tokenizer()
        batch = [datum(tokenizer, s) for s in SENTENCES]
        losses = []
        for step in range(args.steps):
            # Both calls are submitted before either is waited on: they run in order.
            fwd = training.forward_backward(batch, "cross_entropy")
            opt = training.optim_step(types.AdamParams(learning_rate=args.lr))
            out = fwd.result()
            opt.result()
            tokens = sum(sum(d.loss_fn_inputs["weights"].tolist()) for d in batch)
            losses.append(out.metrics["loss:sum"] / tokens)
            print(f"step {step + 1:3d}  loss {losses[-1]:.4f}")

        saved = training.save_weights_for_sampler("final").result()
        print(f"sampler weights {saved.path}")
        sampler = service.create_sampling_client(model_path=saved.path).result()
        prompt = types.ModelInput.from_ints(tokenizer.encode("the quick", add_special_tokens=False))
        answer = sampler.sample(
            prompt, 1, types.SamplingParams(max_tokens=16, temperature=0.0)
        ).result()
        print("sample:", json.dumps(tokenizer.decode(answer.sequences[0].tokens)))

        rest = tinker.RestClient()
        run_id = saved.path.removeprefix("tinker://").split("/")[0]
        checkpoints = rest.list_checkpoints(run_id).result().checkpoints
        print("checkpoints:", [c.checkpoint_id for c in checkpoints])
    print(json.dumps({"losses": [round(x, 4) for x in losses]}))
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
