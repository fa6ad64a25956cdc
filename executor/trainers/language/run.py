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
from executor.trainers.language import batches, data, outputs
from executor.wire import protocol
from executor.wire.plan import Hyperparameters, Plan
from trainyard.training import events


def run(plan: Plan, emit: Emit) -> int:
    stop = Stop.on_sigterm()
    began = time.monotonic()
    return deepspeed.distributed(plan, emit, lambda: _train(plan, emit, stop, began))


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

    torch.manual_seed(plan.job.hyperparameters.seed)  # the job's seed fixes the init
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


def checkpointed(base: Any, mode: str) -> None:
    """Recompute the base's activations in the backward pass (torch's non-reentrant
    checkpoint). A LoRA leaves the embeddings frozen: their output is made to require
    grad so every checkpointed block has a gradient to carry back."""
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if mode == "lora":
        base.enable_input_require_grads()


def options_line(hp: Hyperparameters) -> str:
    """The training options as the run applies them, for the job's log."""
    offload = f", optimizer offloaded to {hp.zero_offload}" if hp.zero_offload != "none" else ""
    return (
        f"{deepspeed.precision_of(hp)} compute, ZeRO stage {hp.zero_stage}{offload}, "
        f"{hp.gradient_accumulation_steps} micro-batches a step, {hp.lr_scheduler_type} "
        f"schedule after {hp.warmup_steps} warm-up steps, gradient checkpointing "
        f"{'on' if hp.gradient_checkpointing else 'off'}, packing "
        f"{'on' if hp.packing else 'off'}"
    )


def weights(module: Any, mode: str) -> dict[str, Any]:
    """A copy of what the run trained: the whole model, or the adapter."""
    if mode == "lora":
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(module)
    else:
        state = module.state_dict()
    return {k: v.detach().clone().cpu() for k, v in state.items()}


def _loss_sum(engine: Any, rows: batches.Rows) -> Any:
    """The summed cross-entropy of a micro-batch on the engine's model."""
    import torch

    logits = engine(**rows.inputs(engine.device)).logits.float()
    return torch.nn.functional.cross_entropy(
        logits.view(-1, logits.size(-1)),
        rows.labels.to(engine.device).view(-1),
        ignore_index=fixture.IGNORE,
        reduction="sum",
    )


@dataclasses.dataclass(frozen=True)
class Examples:
    train: list[fixture.Encoded]
    held: list[fixture.Encoded]
    pad: int

    @property
    def truncated(self) -> int:
        """How many examples `max_seq_length` cut."""
        return sum(e.truncated for e in (*self.train, *self.held))


def compute_precision(hp: Hyperparameters) -> str:
    """The precision the run's matmuls compute in, on a GPU: the job's `mixed_precision`
    where it is bf16 or fp16, else the base's held dtype (`bf16` holds and computes in
    bf16). The dense peak MFU is measured against is this precision's."""
    if not deepspeed.cuda():
        return "fp32"
    if hp.mixed_precision in ("bf16", "fp16"):
        return hp.mixed_precision
    return hp.base_load_precision


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
    over the global batch's trained tokens. Every rank runs `gradient_accumulation_steps`
    micro-steps a step, and DeepSpeed's count of them ends it."""

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
        self.truncated = examples.truncated
        self.batches = data.step_batches(len(self.train), plan)
        self.shape, self.peak = meter
        self.first = True  # this process's first step also reports what MFU is over
        # What an empty micro-batch runs: one ignored token, so it still joins the
        # step's gradient exchange at every ZeRO stage.
        self.idle = batches.padded([fixture.Encoded([self.pad], [fixture.IGNORE])], self.pad)
        # In training mode from here on; an evaluation puts it back when it ends.
        engine.train()

    def micro_batches(self, batch: list[int]) -> list[batches.Rows | None]:
        hp = self.plan.job.hyperparameters
        return batches.micro_batches(
            [self.train[i] for i in data.mine(batch, self.plan)],
            per_device=hp.per_device_train_batch_size,
            accumulation=hp.gradient_accumulation_steps,
            pad=self.pad,
            pack_width=hp.max_seq_length if hp.packing else None,
        )

    def step(self, index: int) -> dict[str, float]:
        import torch
        import torch.distributed as dist

        engine, world = self.engine, self.plan.task.world_size
        batch = self.batches[index]
        tick = time.perf_counter()
        counts = torch.tensor(
            [float(sum(self.train[i].trained_tokens for i in data.mine(batch, self.plan)))]
        )
        if world > 1:
            dist.all_reduce(counts)
        total = max(1.0, counts.item())
        # The loss stays on the device until the step ends: one sync a step, not one a
        # micro-batch.
        loss_sum: Any = 0.0
        grad_norm = 0.0
        for rows in self.micro_batches(batch):
            summed = _loss_sum(engine, rows or self.idle)
            if rows is None:
                loss = summed * 0.0
            else:
                loss_sum = loss_sum + summed.detach()
                # Mean over the global batch's tokens; DeepSpeed averages across ranks.
                loss = summed / total * world
            engine.backward(loss, scale_wrt_gas=False)
            boundary = engine.is_gradient_accumulation_boundary()
            if boundary:  # gradients are whole (and reduced) here, where ZeRO 0 keeps them
                grad_norm = _grad_norm(self.trainable)
            engine.step()
            if boundary:  # ZeRO 1–3 and mixed precision measure it as they step
                grad_norm = _stepped_norm(engine, grad_norm)
        reported = torch.tensor([float(loss_sum)])
        if world > 1:
            dist.all_reduce(reported)
        elapsed = time.perf_counter() - tick
        # The global batch's examples, unpadded: what tokens_per_second and tokens_seen count.
        lengths = [len(self.train[i].input_ids) for i in batch]
        metrics = {
            "loss": round(reported.item() / total, 6),
            "learning_rate": self.scheduler.get_last_lr()[0],
            "grad_norm": round(grad_norm, 6),
            **self._rates(lengths, elapsed),
            deepspeed.TOKENS: sum(lengths),
        }
        if index == 0:  # a series of one point, at the first step
            metrics["truncated_examples"] = float(self.truncated)
        return metrics

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
        try:
            with torch.no_grad():
                for i in range(0, len(self.held), 8):
                    rows = batches.padded(self.held[i : i + 8], self.pad)
                    total += _loss_sum(self.engine, rows).item()
                    count += int((rows.labels != fixture.IGNORE).sum())
        finally:
            self.engine.train()
        return total / max(count, 1)

    def snapshot(self) -> dict[str, Any]:
        with deepspeed.whole(self.engine):
            return weights(self.engine.module, self.plan.job.adaptation.mode)


def _stepped_norm(engine: Any, measured: float) -> float:
    """The gradient norm DeepSpeed measured in its step, where it measured one."""
    norm = engine.get_global_grad_norm()
    if norm is None:
        return measured
    return float(norm.item() if hasattr(norm, "item") else norm)


def _grad_norm(params: list[Any]) -> float:
    import torch

    grads = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    return float(torch.stack(grads).norm()) if grads else 0.0


def engine_for(model: Any, plan: Plan) -> tuple[Any, Any, list[Any]]:
    """The DeepSpeed engine that trains `model` by the job's recipe (its optimizer,
    schedule, precision and ZeRO stage), its schedule, and the parameters it trains. The
    bare loop of bench/training.py builds its engine here too, so the two cannot drift."""
    hp = plan.job.hyperparameters
    trainable = [p for p in model.parameters() if p.requires_grad]
    engine, scheduler = deepspeed.engine_of(
        model,
        deepspeed.optimizer_of(trainable, hp),
        hp,
        planned_steps=plan.job.planned_steps,
        micro_batch=hp.per_device_train_batch_size,
        accumulation=hp.gradient_accumulation_steps,
    )
    return engine, scheduler, trainable


def _train(plan: Plan, emit: Emit, stop: Stop, began: float) -> int:
    say = deepspeed.lead_only(plan, emit)
    hp, mode = plan.job.hyperparameters, plan.job.adaptation.mode
    grouped = time.monotonic()
    loaded = bases.load(plan.job.base_model)
    train, held, dataset_sha = data.examples(plan, loaded.codec)
    examples = Examples(train, held, loaded.codec.pad)
    say(
        events.Log(
            f"{examples.truncated} of {len(train) + len(held)} examples cut at max_seq_length"
        )
    )
    # The digest names the base as published, before it is held in the job's dtype.
    base_sha = fixture.weights_sha256(loaded.model)
    base = bases.at_precision(loaded.model, hp.base_load_precision)
    say(events.Log(f"base loaded in {hp.base_load_precision}"))
    if hp.gradient_checkpointing:
        checkpointed(base, mode)
    model = adapted(base, plan, say)
    initial = (
        {k: v.detach().clone() for k, v in base.state_dict().items()} if mode == "full" else {}
    )
    built = time.monotonic()
    engine, scheduler, trainable = engine_for(model, plan)
    ready = time.monotonic()
    say(events.Log(options_line(hp)))
    # What a job waits for before its first step, past the trainer's imports.
    say(
        events.Log(
            f"ready to train in {ready - began:.2f} s: process group {grouped - began:.2f} s, "
            f"base and data {built - grouped:.2f} s, engine {ready - built:.2f} s"
        )
    )
    steps = LanguageSteps(
        engine, scheduler, trainable, plan, examples, metered(engine.module, plan, say)
    )
    progress = deepspeed.train(engine, plan, stop, say, steps, held=bool(held))
    if progress.step == 0:
        say(events.Status("cancelled"))
        return 0
    say(events.Status("finalizing"))
    deepspeed.save_state(engine, plan, progress.state)
    # Every rank gathers ZeRO-3's partitioned weights; the lead writes them.
    with deepspeed.whole(engine):
        if plan.lead:
            _finish(plan, loaded, engine, progress, Base(initial, base_sha, dataset_sha))
    if not plan.lead:
        emit(events.Status("done"))
    return 0


@dataclasses.dataclass(frozen=True)
class Base:
    """What the run started from: the base's weights (a full run's), their digest, and the
    dataset's."""

    initial: dict[str, Any]
    sha256: str
    dataset_sha256: str


def _finish(
    plan: Plan, loaded: bases.Loaded, engine: Any, progress: deepspeed.Progress, base: Base
) -> None:
    """The lead's last words: the output the job names and the result."""
    mode, step = plan.job.adaptation.mode, progress.step
    if progress.served is None:
        served, served_step = weights(engine.module, mode), step
    else:
        served, served_step = progress.served, int(progress.state["best_step"])
    training_seconds = time.monotonic() - progress.started
    best_step = progress.state["best_step"]
    outputs.write(
        plan,
        loaded,
        outputs.Trained(
            engine.module, served, base.initial, base.sha256, served_step, progress.evals, best_step
        ),
    )
    evaluation = protocol.evaluation_block(
        progress.evals, progress.state["best_loss"], best_step, served_step
    )
    protocol.end(
        plan.work / "state",
        plan.output_dir,
        base_sha256=base.sha256,
        step=step,
        served_step=served_step,
        dataset_sha256=base.dataset_sha256,
        training_seconds=training_seconds,
        evaluated=evaluation,
        stop_reason=progress.stop_reason,
    )
