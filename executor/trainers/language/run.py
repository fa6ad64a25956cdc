"""A language job's run: the base loaded (fully trained, or wrapped in a LoRA that may
start from the adapter the job names), the shared DeepSpeed loop over the job's frozen
split, and the output its `output.kind` names. Ranks other than 0 train and stay quiet."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from executor.models import bases, fixture
from executor.trainers import deepspeed, throughput
from executor.trainers.base import Emit, Stop
from executor.trainers.language import data, outputs
from executor.wire import protocol
from executor.wire.plan import Plan
from trainyard.training import events


def run(plan: Plan, emit: Emit) -> int:
    stop = Stop.on_sigterm()
    return deepspeed.distributed(plan, emit, lambda: _train(plan, emit, stop))


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


def adapted(base: Any, plan: Plan, say: Emit) -> Any:
    """The model the job trains: the base itself, or the base inside its LoRA."""
    ad = plan.job.adaptation
    if ad.mode != "lora":
        return base
    import torch
    from peft import LoraConfig, get_peft_model

    # The job's seed fixes the adapter's initialisation: the same job, the same LoRA.
    torch.manual_seed(plan.job.hyperparameters.seed)
    lora = LoraConfig(
        r=ad.rank,
        lora_alpha=ad.alpha,
        target_modules=list(ad.targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora)
    if plan.init_adapter_dir is not None:
        start_from_adapter(model, plan.init_adapter_dir)
        say(events.Log("started from the adapter the job names"))
    return model


def weights(module: Any, mode: str) -> dict[str, Any]:
    """A copy of what the run trained: the whole model, or the adapter."""
    if mode == "lora":
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(module)
    else:
        state = module.state_dict()
    return {k: v.detach().clone().cpu() for k, v in state.items()}


def _loss_sum(engine: Any, rows: list[fixture.Encoded], pad: int) -> tuple[Any, Any]:
    """The summed cross-entropy of rows on the engine's model, and their labels."""
    import torch

    ids, labels, mask = (t.to(engine.device) for t in fixture.collate(rows, pad))
    logits = engine(input_ids=ids, attention_mask=mask).logits.float()
    summed = torch.nn.functional.cross_entropy(
        logits.view(-1, logits.size(-1)),
        labels.view(-1),
        ignore_index=fixture.IGNORE,
        reduction="sum",
    )
    return summed, labels


@dataclasses.dataclass(frozen=True)
class Examples:
    train: list[fixture.Encoded]
    held: list[fixture.Encoded]
    pad: int


def compute_precision(hp: Any) -> str:
    """The precision the run's matmuls compute in: `mixed_precision` where the job names
    it, else the base's held dtype (`bf16` holds and computes in bf16), on a GPU; fp32 on
    the CPU, where no mixed precision runs."""
    if not deepspeed.cuda():
        return "fp32"
    mixed = getattr(hp, "mixed_precision", "")
    return str(mixed or hp.base_load_precision)


def metered(model: Any, plan: Plan, say: Emit) -> tuple[throughput.Shape, float | None]:
    """The model's FLOPs shape and the whole world's dense peak (None without one); says
    what they were computed from."""
    import torch

    shape = throughput.shape_of(model, adapter=plan.job.adaptation.mode == "lora")
    precision = compute_precision(plan.job.hyperparameters)
    device = torch.cuda.get_device_name(0) if deepspeed.cuda() else "cpu"
    peak = throughput.peak_tflops(device, precision) if deepspeed.cuda() else None
    world = plan.task.world_size
    say(
        events.Log(
            f"throughput: {world} x {device} in {precision}, "
            f"{shape.flops_per_token():.4g} FLOPs a token, dense peak "
            + (f"{peak:g} TFLOP/s a device" if peak else "unknown (no MFU)")
        )
    )
    return shape, peak * world if peak else None


class LanguageSteps:
    """One optimizer step over this rank's share of the step's batch, the loss averaged
    over the global batch's trained tokens."""

    def __init__(
        self,
        engine: Any,
        scheduler: Any,
        trainable: list[Any],
        plan: Plan,
        examples: Examples,
        meter: tuple[throughput.Shape, float | None],
    ) -> None:
        self.engine, self.scheduler, self.trainable, self.plan = engine, scheduler, trainable, plan
        self.train, self.held, self.pad = examples.train, examples.held, examples.pad
        self.batches = data.step_batches(len(self.train), plan)
        self.shape, self.peak = meter
        self.first = True  # this process's first step also reports what MFU is over

    def step(self, index: int) -> dict[str, float]:
        import torch
        import torch.distributed as dist

        engine, world = self.engine, self.plan.task.world_size
        batch = self.batches[index]
        tick = time.perf_counter()
        micro = data.my_share(batch, self.plan)
        counts = torch.tensor([float(sum(self.train[i].trained_tokens for m in micro for i in m))])
        if world > 1:
            dist.all_reduce(counts)
        total = max(1.0, counts.item())
        # The loss stays on the device until the step ends: one sync a step, not one a
        # micro-batch.
        loss_sum: Any = 0.0
        grad_norm = 0.0
        engine.train()
        for n, group in enumerate(micro):
            last = n == len(micro) - 1
            engine.set_gradient_accumulation_boundary(last)
            if not group:
                # An empty share still joins the step's gradient exchange.
                loss = sum(p.sum() * 0.0 for p in self.trainable)
            else:
                summed, _ = _loss_sum(engine, [self.train[i] for i in group], self.pad)
                loss_sum = loss_sum + summed.detach()
                # Mean over the global batch's tokens; DeepSpeed averages across ranks.
                loss = summed / total * world
            engine.backward(loss, scale_wrt_gas=False)
            if last:  # gradients are whole (and reduced) at the boundary
                grad_norm = _grad_norm(self.trainable)
            engine.step()
        reported = torch.tensor([float(loss_sum)])
        if world > 1:
            dist.all_reduce(reported)
        elapsed = time.perf_counter() - tick
        return {
            "loss": round(reported.item() / total, 6),
            "learning_rate": self.scheduler.get_last_lr()[0],
            "grad_norm": round(grad_norm, 6),
            **self._rates([len(self.train[i].input_ids) for i in batch], elapsed),
        }

    def _rates(self, lengths: list[int], elapsed: float) -> dict[str, float]:
        """The step's throughput series; `mfu` only where the device has a known peak,
        and the first step also the FLOPs a token and the peak they are measured against."""
        r = throughput.rates(self.shape, lengths, elapsed, self.peak)
        out = {
            "tokens_per_second": round(r.tokens_per_second, 1),
            "samples_per_second": round(r.samples_per_second, 3),
            "model_tflops": round(r.model_tflops, 6),
        }
        if r.mfu is not None:
            out["mfu"] = round(r.mfu, 5)
        if deepspeed.cuda():
            import torch

            out["peak_memory_bytes"] = float(torch.cuda.max_memory_allocated())
        if self.first:
            self.first = False
            out["flops_per_token"] = self.shape.flops_per_token()
            if self.peak:
                out["peak_tflops"] = self.peak
        return out

    def evaluate(self) -> float:
        import torch

        self.engine.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(self.held), 8):
                summed, labels = _loss_sum(self.engine, self.held[i : i + 8], self.pad)
                total += summed.item()
                count += int((labels != fixture.IGNORE).sum())
        return total / max(count, 1)

    def snapshot(self) -> dict[str, Any]:
        return weights(self.engine.module, self.plan.job.adaptation.mode)


def _grad_norm(params: list[Any]) -> float:
    import torch

    grads = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    return float(torch.stack(grads).norm()) if grads else 0.0


def engine_for(model: Any, plan: Plan, zero_stage: int) -> tuple[Any, Any, list[Any]]:
    """The DeepSpeed engine that trains `model` by the job's recipe (its optimizer,
    schedule, precision and ZeRO stage), its schedule, and the parameters it trains. The
    bare loop of bench/training.py builds its engine here too, so the two cannot drift."""
    import torch

    hp = plan.job.hyperparameters
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=hp.learning_rate, weight_decay=hp.weight_decay)
    engine, scheduler = deepspeed.engine_of(
        model,
        optimizer,
        hp.warmup_steps,
        micro_batch=hp.per_device_train_batch_size,
        zero_stage=zero_stage,
        # Mixed precision on a GPU where the job asks for bf16; fp32 stays fp32.
        bf16=hp.base_load_precision == "bf16" and deepspeed.cuda(),
    )
    return engine, scheduler, trainable


def _train(plan: Plan, emit: Emit, stop: Stop) -> int:
    say = deepspeed.lead_only(plan, emit)
    hp, mode = plan.job.hyperparameters, plan.job.adaptation.mode
    loaded = bases.load(plan.job.base_model)
    train, held, dataset_sha = data.examples(plan, loaded.codec)
    # The digest names the base as published, before it is held in the job's dtype.
    base_sha = fixture.weights_sha256(loaded.model)
    base = bases.at_precision(loaded.model, hp.base_load_precision)
    say(events.Log(f"base loaded in {hp.base_load_precision}"))
    model = adapted(base, plan, say)
    initial = (
        {k: v.detach().clone() for k, v in base.state_dict().items()} if mode == "full" else {}
    )
    engine, scheduler, trainable = engine_for(model, plan, loaded.zero_stage)
    examples = Examples(train, held, loaded.codec.pad)
    steps = LanguageSteps(
        engine, scheduler, trainable, plan, examples, metered(engine.module, plan, say)
    )
    progress = deepspeed.train(engine, plan, stop, say, steps, held=bool(held))
    step = progress.step
    if step == 0:
        say(events.Status("cancelled"))
        return 0
    if progress.served is None or not held:
        served, served_step = weights(engine.module, mode), step
    else:
        served, served_step = progress.served, int(progress.state["best_step"])
    say(events.Status("finalizing"))
    deepspeed.save_state(engine, plan, progress.state)
    if not plan.lead:
        emit(events.Status("done"))
        return 0
    training_seconds = time.monotonic() - progress.started
    best_step = progress.state["best_step"]
    outputs.write(
        plan,
        loaded,
        outputs.Trained(
            engine.module, served, initial, base_sha, served_step, progress.evals, best_step
        ),
    )
    evaluation = protocol.evaluation_block(
        progress.evals, progress.state["best_loss"], best_step, served_step
    )
    protocol.end(
        plan.work / "state",
        plan.output_dir,
        base_sha256=base_sha,
        step=step,
        served_step=served_step,
        dataset_sha256=dataset_sha,
        training_seconds=training_seconds,
        evaluated=evaluation,
        stop_reason=progress.stop_reason,
    )
    return 0
