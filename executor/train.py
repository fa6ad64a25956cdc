"""The trainer: a DeepSpeed program the executor runs for each task of a job.

    python -m executor.train task.json

It reads the job's frozen snapshot and split, trains the base (fully or with LoRA)
for exactly the planned steps in a seeded data order, evaluates at the checkpoint
cadence, serves the best evaluation's weights, stops early when asked to, saves a
resumable DeepSpeed state, and writes the output its `output.kind` names. Events go to
stdout as the executor protocol says. Ranks other than 0 train and stay quiet.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

from executor.protocol import emit, emit_end, evaluation_block
from trainyard.ports import free_port
from trainyard.training.catalog import DECIDER_BASE, FIXTURE_BASE

# What the functions below import that a warm process imports ahead (`executor.warm`):
# peft brings transformers; executor.bases builds the fixture model.
PRELOAD = ("torch", "torch.distributed", "deepspeed", "peft", "safetensors.torch", "executor.bases")


@dataclasses.dataclass
class Plan:
    """What this process does, from task.json."""

    job: dict[str, Any]
    task: dict[str, Any]
    output_dir: Path
    work: Path
    snapshot_path: Path | None
    resume_dir: Path | None
    # The unpacked adapter the job's `from` names: its LoRA starts from those weights.
    init_adapter_dir: Path | None = None

    @property
    def hp(self) -> dict[str, Any]:
        return dict(self.job.get("hyperparameters") or {})

    @property
    def rank(self) -> int:
        return int(self.task.get("rank", 0))

    @property
    def world(self) -> int:
        return int(self.task.get("world_size", 1))

    @property
    def planned_steps(self) -> int:
        return int(self.job["planned_steps"])


def load_plan(path: str) -> Plan:
    spec = json.loads(Path(path).read_text())
    work = Path(path).resolve().parent
    return Plan(
        job=spec["job"],
        task=spec["task"],
        output_dir=Path(spec["output_dir"]),
        work=work,
        snapshot_path=Path(spec["snapshot_path"]) if spec.get("snapshot_path") else None,
        resume_dir=Path(spec["resume_dir"]) if spec.get("resume_dir") else None,
        init_adapter_dir=(Path(spec["init_adapter_dir"]) if spec.get("init_adapter_dir") else None),
    )


# -- data --------------------------------------------------------------------------------


def examples(plan: Plan, codec: Any = None) -> tuple[list[Any], list[Any], str]:
    """The job's frozen split: the snapshot the job holds, or for the built-in fixture,
    rebuilt with the same code that froze it; either is checked against its sha256."""
    from executor import fixture
    from trainyard.training import datasets

    dataset = plan.job["dataset"]
    mask = plan.job["objective"]["loss_mask"]
    if plan.snapshot_path is not None:
        data = plan.snapshot_path.read_bytes()
        items, sha256 = datasets.read_snapshot(data), hashlib.sha256(data).hexdigest()
    else:
        snapshot = datasets.build_snapshot(
            datasets.select(datasets.fixture_rows(), dataset.get("tags", [])), mask
        )
        items, sha256 = snapshot.items, snapshot.sha256
    expected = (plan.job.get("preparation") or {}).get("snapshot_sha256", "")
    if expected and sha256 != expected:
        raise SystemExit("dataset_changed")
    prompt = dataset.get("system_prompt", "")
    max_len = int(plan.hp["max_seq_length"])
    train: list[Any] = []
    held: list[Any] = []
    for row, split in items:
        if not row.trainable(mask):
            continue
        messages = [(r, c) for r, c in row.messages if c.strip()]
        if prompt:
            messages = [("system", prompt), *messages]
        encoded = fixture.encode(
            messages, loss_mask=mask, max_seq_length=max_len, codec=codec or fixture.BYTES
        )
        (held if split == "eval" else train).append(encoded)
    return train, held, sha256


def step_batches(count: int, plan: Plan) -> list[list[int]]:
    """Every optimizer step's examples, in order: each epoch a seeded permutation, cut
    into effective batches (a partial last one is still a step), for exactly the
    planned steps. The same job always walks the same order, so a resume continues it."""
    ebs = int(plan.job["effective_batch_size"])
    seed = int(plan.hp.get("seed", 0))
    steps: list[list[int]] = []
    epoch = 0
    while len(steps) < plan.planned_steps:
        order = list(range(count))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        steps += [order[i : i + ebs] for i in range(0, count, ebs)]
        epoch += 1
    return steps[: plan.planned_steps]


def my_share(batch: list[int], plan: Plan) -> list[list[int]]:
    """This rank's micro-batches of one global batch."""
    per_device = int(plan.hp["per_device_train_batch_size"])
    mine = batch[plan.rank :: plan.world]
    return [mine[i : i + per_device] for i in range(0, len(mine), per_device)] or [[]]


# -- the run -----------------------------------------------------------------------------


def init_distributed(plan: Plan) -> None:
    import torch.distributed as dist

    if plan.rank == 0:
        host = os.environ.get("TRAINYARD_COORDINATOR_HOST", "127.0.0.1")
        port = free_port("")  # the other ranks connect from their machines
        if plan.world > 1:
            emit(type="coordinator", addr=f"{host}:{port}")
    else:
        host, port_text = str(plan.task["coordinator"]).rsplit(":", 1)
        port = int(port_text)
    os.environ.update(
        RANK=str(plan.rank),
        WORLD_SIZE=str(plan.world),
        LOCAL_RANK="0",
        MASTER_ADDR=host,
        MASTER_PORT=str(port),
    )
    import datetime as dt

    dist.init_process_group(
        "gloo" if not _cuda() else "nccl",
        init_method=f"tcp://{host}:{port}",
        rank=plan.rank,
        world_size=plan.world,
        timeout=dt.timedelta(minutes=10),
    )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main(task_file: str) -> int:
    plan = load_plan(task_file)
    stop = {"asked": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(asked=True))
    lead = plan.rank == 0
    if lead:
        emit(type="status", status="accepted")
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if _cuda() else "cpu")
    import torch

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))))
    init_distributed(plan)
    try:
        return Trainer(plan, stop).run()
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def start_from_adapter(model: Any, directory: Path) -> None:
    """Load a peft adapter's weights (`adapter_model.safetensors`) into the fresh LoRA
    `model`, so step 0 starts where the adapter ended. Every LoRA weight must come from
    it: an adapter of another shape fails the run rather than half-load."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(directory / "adapter_model.safetensors"))
    expected = set(get_peft_model_state_dict(model))
    if set(weights) != expected:
        raise ValueError("the adapter's weights do not fit the job's LoRA")
    loaded = set_peft_model_state_dict(model, weights)
    if getattr(loaded, "unexpected_keys", None):
        raise ValueError("the adapter's weights do not fit the job's LoRA")


class Trainer:
    def __init__(self, plan: Plan, stop: dict[str, bool]) -> None:
        self.plan, self.stop = plan, stop
        self.lead = plan.rank == 0

    def say(self, **event: Any) -> None:
        if self.lead:
            emit(**event)

    def run(self) -> int:
        if self.plan.job["base_model"] == DECIDER_BASE:
            from executor import train_decisions

            return train_decisions.run(self.plan, self.stop)
        import deepspeed
        import torch
        import torch.distributed as dist

        from executor import fixture

        plan, hp = self.plan, self.plan.hp
        from executor import bases

        loaded = bases.load(plan.job["base_model"])
        self.loaded = loaded
        train, held, dataset_sha = examples(plan, loaded.codec)
        base = loaded.model
        base_sha = fixture.weights_sha256(base)
        mode = plan.job["adaptation"]["mode"]
        model: torch.nn.Module = base
        if mode == "lora":
            from peft import LoraConfig, get_peft_model

            ad = plan.job["adaptation"]
            model = get_peft_model(
                base,
                LoraConfig(
                    r=int(ad["rank"]), lora_alpha=int(ad["alpha"]), target_modules=list(ad["targets"]),
                    lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                ),
            )  # fmt: skip
            if plan.init_adapter_dir is not None:
                start_from_adapter(model, plan.init_adapter_dir)
                self.say(type="log", line="started from the adapter the job names")
        initial = (
            {k: v.detach().clone() for k, v in base.state_dict().items()} if mode == "full" else {}
        )
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            trainable,
            lr=float(hp["learning_rate"]),
            weight_decay=float(hp.get("weight_decay", 0.0)),
        )
        warmup = int(hp.get("warmup_steps", 0))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / (warmup + 1))
        )
        if not _cuda():
            # DeepSpeed's shared-memory CPU allreduce compiles for over a minute on first
            # use; gloo's serves one-host worlds. DeepSpeed keeps this probe table for edits.
            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        use_bf16 = _cuda() and torch.cuda.is_bf16_supported()
        engine, _, _, _ = deepspeed.initialize(
            model=model,
            optimizer=optimizer,
            lr_scheduler=scheduler,
            dist_init_required=False,
            config={
                "train_micro_batch_size_per_gpu": int(hp["per_device_train_batch_size"]),
                "gradient_accumulation_steps": 1,
                "zero_optimization": {"stage": loaded.zero_stage},
                "zero_allow_untested_optimizer": True,
                "gradient_clipping": 1.0,
                "bf16": {"enabled": use_bf16},
                "steps_per_print": 10**9,
                "wall_clock_breakdown": False,
            },
        )
        device = engine.device
        batches = step_batches(len(train), plan)
        save_every = int(hp.get("save_steps", 10))
        patience = int(hp.get("early_stopping_patience", 0)) if held else 0
        state: dict[str, Any] = {
            "step": 0,
            "best_loss": None,
            "best_step": None,
            "evals": [],
            "bad_evals": 0,
        }
        served: dict[str, torch.Tensor] | None = None
        if plan.resume_dir is not None:
            _, client = engine.load_checkpoint(str(plan.resume_dir), tag="state")
            state.update({k: v for k, v in (client or {}).items() if k in state})
            self.say(type="log", line=f"resumed at step {state['step']}")
        self.say(type="status", status="running")
        loop_started = time.monotonic()
        stop_reason = "max_steps" if "max_steps" in hp else "completed"
        step = int(state["step"])
        world = plan.world
        while step < plan.planned_steps:
            if self.stop["asked"]:
                stop_reason = "cancelled"
                break
            batch = batches[step]
            tick = time.perf_counter()
            micro = my_share(batch, plan)
            local_tokens = sum(train[i].trained_tokens for m in micro for i in m)
            counts = torch.tensor([float(local_tokens)])
            if world > 1:
                dist.all_reduce(counts)
            total = max(1.0, counts.item())
            loss_sum, grad_norm = 0.0, 0.0
            engine.train()
            for index, group in enumerate(micro):
                engine.set_gradient_accumulation_boundary(index == len(micro) - 1)
                if not group:
                    # An empty share still joins the step's gradient exchange.
                    loss = sum(p.sum() * 0.0 for p in trainable)
                else:
                    ids, labels, mask = (
                        t.to(device)
                        for t in fixture.collate([train[i] for i in group], loaded.codec.pad)
                    )
                    logits = engine(input_ids=ids, attention_mask=mask).logits.float()
                    summed = torch.nn.functional.cross_entropy(
                        logits.view(-1, logits.size(-1)),
                        labels.view(-1),
                        ignore_index=fixture.IGNORE,
                        reduction="sum",
                    )
                    loss_sum += summed.item()
                    # Mean over the global batch's tokens; DeepSpeed averages across ranks.
                    loss = summed / total * world
                engine.backward(loss, scale_wrt_gas=False)
                if index == len(micro) - 1:  # gradients are whole (and reduced) at the boundary
                    grads = [
                        p.grad.detach().float().norm() for p in trainable if p.grad is not None
                    ]
                    grad_norm = float(torch.stack(grads).norm()) if grads else 0.0
                engine.step()
            step += 1
            reported = torch.tensor([loss_sum])
            if world > 1:
                dist.all_reduce(reported)
            elapsed = time.perf_counter() - tick
            tokens = sum(len(train[i].input_ids) for i in batch)
            self.say(type="metric", name="loss", step=step, value=round(reported.item() / total, 6))
            self.say(
                type="metric", name="learning_rate", step=step, value=scheduler.get_last_lr()[0]
            )
            self.say(type="metric", name="grad_norm", step=step, value=round(grad_norm, 6))
            self.say(
                type="metric",
                name="tokens_per_second",
                step=step,
                value=round(tokens / max(elapsed, 1e-9), 1),
            )
            state["step"] = step
            if held and (step % save_every == 0 or step == plan.planned_steps):
                eval_loss = self.evaluate(engine, held)
                state["evals"].append([step, eval_loss])
                self.say(type="metric", name="eval_loss", step=step, value=round(eval_loss, 6))
                if state["best_loss"] is None or eval_loss < state["best_loss"]:
                    state.update(best_loss=eval_loss, best_step=step, bad_evals=0)
                    served = self.weights(engine.module, mode)
                else:
                    state["bad_evals"] += 1
                    if patience and state["bad_evals"] >= patience:
                        stop_reason = "early_stopping"
                        break
        if step == 0:
            self.say(type="status", status="cancelled")
            return 0
        if served is None or not held:
            served = self.weights(engine.module, mode)
            served_step = step
        else:
            served_step = int(state["best_step"])
        self.say(type="status", status="finalizing")
        engine.save_checkpoint(str(plan.work / "state"), tag="state", client_state=state)
        dist.barrier()
        if not self.lead:
            emit(type="status", status="done")
            return 0
        training_seconds = time.monotonic() - loop_started
        self.write_output(engine.module, mode, served, initial, base_sha, served_step, state)
        emit_end(
            plan.work / "state",
            plan.output_dir,
            step,
            served_step,
            base_sha256=base_sha,
            dataset_sha256=dataset_sha,
            training_seconds=round(training_seconds, 3),
            evaluation=evaluation_block(state, served_step),
            outcome={"stop_reason": stop_reason, "downgrades": []},
        )
        return 0

    def evaluate(self, engine: Any, held: list[Any]) -> float:
        import torch

        from executor import fixture

        engine.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(held), 8):
                ids, labels, mask = (
                    t.to(engine.device)
                    for t in fixture.collate(held[i : i + 8], self.loaded.codec.pad)
                )
                logits = engine(input_ids=ids, attention_mask=mask).logits.float()
                total += torch.nn.functional.cross_entropy(
                    logits.view(-1, logits.size(-1)),
                    labels.view(-1),
                    ignore_index=fixture.IGNORE,
                    reduction="sum",
                ).item()
                count += int((labels != fixture.IGNORE).sum())
        return total / max(count, 1)

    @staticmethod
    def weights(module: Any, mode: str) -> dict[str, Any]:
        """A copy of what the run trained: the whole model, or the adapter."""
        if mode == "lora":
            from peft import get_peft_model_state_dict

            return {
                k: v.detach().clone().cpu() for k, v in get_peft_model_state_dict(module).items()
            }
        return {k: v.detach().clone().cpu() for k, v in module.state_dict().items()}

    def write_output(
        self, module: Any, mode: str, served: dict[str, Any], initial: dict[str, Any], base_sha: str,
        served_step: int, state: dict[str, Any],
    ) -> None:  # fmt: skip
        """The artifact `output.kind` names, with a probe: token ids and the served model's
        logits on them, so anyone can check that what loads is what trained."""
        import torch
        from safetensors.torch import save

        from executor import fixture

        out, job = self.plan.output_dir, self.plan.job
        out.mkdir(parents=True, exist_ok=True)
        kind = job["output"]["kind"]
        if mode == "lora":
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(module, served)
            merged = module.merge_and_unload() if kind == "checkpoint" else None
            model = merged if merged is not None else module
        else:
            module.load_state_dict(served)
            model = module
        meta = {
            "base_model": job["base_model"], "revision": job.get("revision", ""), "base_sha256": base_sha,
            "adaptation": job["adaptation"], "step": served_step, "job_id": job["id"],
        }  # fmt: skip
        if kind == "checkpoint":
            self.loaded.save(out, model, meta)
        elif kind == "lora":
            module.save_pretrained(str(out), safe_serialization=True)
        else:  # capability: what the job taught, apart from its base
            evaluation = {"evals": state["evals"], "best_step": state["best_step"]}
            if mode == "lora":
                (out / "lora.safetensors").write_bytes(
                    save({k: v.contiguous() for k, v in sorted(served.items())})
                )
                form = "lora"
            else:
                delta = {k: (served[k] - initial[k]).contiguous() for k in sorted(served)}
                (out / "delta.safetensors").write_bytes(save(delta))
                form = "delta"
            capability = {
                **meta,
                "form": form,
                "protect": job.get("protect") or {},
                "evaluation": evaluation,
            }
            (out / "capability.json").write_text(json.dumps(capability, indent=2, sort_keys=True))
            (out / "README.md").write_text(capability_readme(capability))
        probe = torch.tensor(
            [
                fixture.encode(
                    [("user", "Reverse: probe")],
                    loss_mask="full_sequence",
                    max_seq_length=64,
                    codec=self.loaded.codec,
                ).input_ids
            ]
        )
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=probe.to(next(model.parameters()).device)).logits.float().cpu()
        (out / "probe.safetensors").write_bytes(
            save({"input_ids": probe, "logits": logits.contiguous()})
        )


# -- a capability's README ---------------------------------------------------------------

README = """# A capability of {base_model}

What job {job_id} taught its base, kept apart from it: {what}.
`capability.json` describes it in full; `probe.safetensors` holds input ids and the logits
the trained model gave on them, to check against.

Base: `{base_model}` (revision {revision}), base_sha256 `{base_sha256}`.
{get_base}

Apply it, with this directory as `capability`:

```python
{code}
probe = load_file("capability/probe.safetensors")
with torch.no_grad():
    logits = model(input_ids=probe["input_ids"]).logits
print(torch.allclose(logits, probe["logits"], atol=1e-5))  # True: the model the job served
```
"""
GET_BUILT_IN = """Get it (the sha256 of its `model.safetensors` is that base_sha256):

    trainyard models export {base_model} -o base"""
GET_LOCAL = """It is the Hugging Face model on the deployment's disk: use its directory as `base`
(base_sha256 is the sha256 of its weights saved as one safetensors file, names in order)."""
APPLY = {
    "delta": """import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("base", dtype=torch.float32)
weights = model.state_dict()
for name, delta in load_file("capability/delta.safetensors").items():
    weights[name] = weights[name] + delta  # W = W₀ + Δ
model.load_state_dict(weights)""",
    "lora": """import json
import torch
from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

ad = json.load(open("capability/capability.json"))["adaptation"]
lora = LoraConfig(r=ad["rank"], lora_alpha=ad["alpha"], target_modules=ad["targets"], task_type="CAUSAL_LM")
model = get_peft_model(AutoModelForCausalLM.from_pretrained("base", dtype=torch.float32), lora)
set_peft_model_state_dict(model, load_file("capability/lora.safetensors"))""",
}
WHAT = {
    "delta": "each weight's change, W − W₀, in `delta.safetensors`",
    "lora": "a LoRA adapter's weights (peft's names) in `lora.safetensors`",
}


def capability_readme(capability: dict[str, Any]) -> str:
    """How to load and apply a capability outside Trainyard: which base, by name and
    sha256, and a few lines of Python that rebuild the served model and check the probe."""
    name, form = capability["base_model"], capability["form"]
    return README.format(
        base_model=name,
        job_id=capability["job_id"],
        revision=capability["revision"],
        what=WHAT[form],
        base_sha256=capability["base_sha256"],
        get_base=(GET_BUILT_IN if name == FIXTURE_BASE else GET_LOCAL).format(base_model=name),
        code=APPLY[form],
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
