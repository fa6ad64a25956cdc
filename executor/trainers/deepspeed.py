"""The one DeepSpeed loop both built-in trainers run: the process group, the engine, and
the steps (resume, cooperative stop, evaluation at the checkpoint cadence, the best
evaluation's weights served, early stopping), with what differs between them handed in
as a `Steps`. torch and DeepSpeed are imported inside the functions, so a warm process
can import this module before a task names its devices."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from executor.trainers.base import Emit, Stop
from executor.wire.plan import Hyperparameters, Plan
from trainyard.ports import free_port
from trainyard.training import events


def cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def lead_only(plan: Plan, emit: Emit) -> Emit:
    """Ranks other than 0 train and stay quiet."""
    return emit if plan.lead else lambda _: None


def distributed(plan: Plan, emit: Emit, body: Callable[[], int]) -> int:
    """Run `body` inside the task's process group: the lead says it accepted the task, the
    group forms (the lead publishes where), and it is torn down however `body` ends."""
    if plan.lead:
        emit(events.Status("accepted"))
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if cuda() else "cpu")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))))
    _init_process_group(plan, emit)
    try:
        return body()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _init_process_group(plan: Plan, emit: Emit) -> None:
    import torch.distributed as dist

    rank, world = plan.task.rank, plan.task.world_size
    if rank == 0:
        host = os.environ.get("TRAINYARD_COORDINATOR_HOST", "127.0.0.1")
        port = free_port("")  # the other ranks connect from their machines
        if world > 1:
            emit(events.Coordinator(f"{host}:{port}"))
    else:
        host, port_text = plan.task.coordinator.rsplit(":", 1)
        port = int(port_text)
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK="0",
        MASTER_ADDR=host,
        MASTER_PORT=str(port),
    )
    dist.init_process_group(
        "gloo" if not cuda() else "nccl",
        init_method=f"tcp://{host}:{port}",
        rank=rank,
        world_size=world,
        timeout=dt.timedelta(minutes=10),
    )


# What a job's `lr_scheduler_type` names among transformers' schedules: its `constant`
# warms up too, as `linear` and `cosine` do.
SCHEDULES = {"linear": "linear", "cosine": "cosine", "constant": "constant_with_warmup"}


def optimizer_of(params: list[Any], hp: Hyperparameters) -> Any:
    """AdamW over `params`. With the optimizer offloaded on a GPU, DeepSpeed's CPUAdam
    (compiled once per machine, 70–80 s, then cached): torch's AdamW stepping in host
    memory is several times slower. On a CPU every tensor is in host memory already, so
    torch's AdamW serves and nothing compiles."""
    if hp.zero_offload == "cpu" and cuda():
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(params, lr=hp.learning_rate, weight_decay=hp.weight_decay)
    import torch

    return torch.optim.AdamW(params, lr=hp.learning_rate, weight_decay=hp.weight_decay)


def precision_of(hp: Hyperparameters) -> str:
    """The precision the steps compute in. fp16 where no GPU runs it fails the run rather
    than train in another precision. A base held in bf16 on a GPU computes in bf16, as
    jobs did before `mixed_precision` existed."""
    if hp.mixed_precision == "fp16" and not cuda():
        raise SystemExit("unsupported_mixed_precision")
    if hp.mixed_precision == "fp32" and hp.base_load_precision == "bf16" and cuda():
        return "bf16"
    return hp.mixed_precision


def ds_config(hp: Hyperparameters, micro_batch: int, accumulation: int) -> dict[str, Any]:
    """The DeepSpeed configuration of a job's options."""
    zero: dict[str, Any] = {"stage": hp.zero_stage}
    if hp.zero_offload == "cpu":
        zero["offload_optimizer"] = {"device": "cpu"}
    precision = precision_of(hp)
    return {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": accumulation,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        # Offloading with torch's AdamW (see `optimizer_of`) is deliberate on a CPU.
        "zero_force_ds_cpu_optimizer": False,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16"},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def engine_of(
    model: Any,
    optimizer: Any,
    hp: Hyperparameters,
    *,
    planned_steps: int,
    micro_batch: int,
    accumulation: int = 1,
) -> tuple[Any, Any]:
    """The DeepSpeed engine over `model` as the job's options configure it, and the
    learning-rate schedule it steps at each optimizer step (transformers' schedules)."""
    import deepspeed
    from transformers import get_scheduler

    scheduler = get_scheduler(
        SCHEDULES[hp.lr_scheduler_type],
        optimizer,
        num_warmup_steps=hp.warmup_steps,
        num_training_steps=planned_steps,
    )
    if not cuda():
        # DeepSpeed's shared-memory CPU allreduce compiles for over a minute on first
        # use; gloo's serves one-host worlds. DeepSpeed keeps this probe table for edits.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    engine, _, _, _ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=scheduler,
        dist_init_required=False,
        config=ds_config(hp, micro_batch, accumulation),
    )
    return engine, scheduler


def whole(engine: Any) -> contextlib.AbstractContextManager[Any]:
    """A context in which the engine's module holds its whole weights: ZeRO-3 partitions
    them across the ranks, and every rank must enter to gather them. What is changed
    inside is dropped at its end; other stages hold them whole already."""
    if engine.zero_optimization_stage() != 3:
        return contextlib.nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(list(engine.module.parameters()), modifier_rank=None)


# What a step's metrics may hold besides its series: the tokens the step trained (padding
# not counted). The loop keeps their running sum in the state, so an attempt that resumes
# continues the count, and reports the sum as the `tokens_seen` series, the axis that
# lines up runs of other batch sizes or sequence lengths.
TOKENS = "tokens"


class Steps(Protocol):
    """What a trainer's loop does at each step, and how it evaluates and keeps weights."""

    def step(self, index: int) -> dict[str, float]:
        """Train step `index` (from 0); the step's metrics by series, in order, and the
        tokens it trained under `TOKENS` where the trainer counts them."""
        ...

    def evaluate(self) -> float:
        """The held-out loss now."""
        ...

    def snapshot(self) -> Any:
        """A copy of the weights to serve if this evaluation stays the best."""
        ...


@dataclasses.dataclass
class Progress:
    """Where the loop stopped. `state` is what a checkpoint saves and a resume restores."""

    state: dict[str, Any]
    stop_reason: str
    started: float
    # The best evaluation's weights: None when no evaluation made them the best in this
    # process (and the trainer does not keep them in `state`).
    served: Any = None

    @property
    def step(self) -> int:
        return int(self.state["step"])

    @property
    def evals(self) -> list[tuple[int, float]]:
        return [(int(s), float(loss)) for s, loss in self.state["evals"]]


def train(
    engine: Any,
    plan: Plan,
    stop: Stop,
    say: Emit,
    steps: Steps,
    *,
    held: bool,
    served_in_state: bool = False,
) -> Progress:
    """Step from where a resumed state left off to the planned steps, or until asked to
    stop, or until evaluations stop improving for `early_stopping_patience` of them.
    `served_in_state` keeps the best weights in the saved state, so a resume serves them."""
    hp = plan.job.hyperparameters
    planned = plan.job.planned_steps
    patience = hp.early_stopping_patience if held else 0
    state: dict[str, Any] = {
        "step": 0,
        "best_loss": None,
        "best_step": None,
        "evals": [],
        "bad_evals": 0,
        "tokens_seen": 0,
    }
    if served_in_state:
        state["served"] = None
    if plan.resume_dir is not None:
        _, client = engine.load_checkpoint(str(plan.resume_dir), tag="state")
        state.update({k: v for k, v in (client or {}).items() if k in state})
        if "tokens_seen" not in (client or {}):
            state["tokens_seen"] = None  # a state saved before the count: it is unknown
        say(events.Log(f"resumed at step {state['step']}"))
    say(events.Status("running"))
    progress = Progress(state, "max_steps" if hp.max_steps is not None else "completed", 0.0)
    progress.started = time.monotonic()
    step = int(state["step"])
    while step < planned:
        if stop.asked:
            progress.stop_reason = "cancelled"
            break
        metrics = steps.step(step)
        step += 1
        trained = metrics.pop(TOKENS, None)
        if trained is not None and state["tokens_seen"] is not None:
            state["tokens_seen"] += int(trained)
            metrics["tokens_seen"] = state["tokens_seen"]
        for name, value in metrics.items():
            say(events.Metric(name, step, value))
        state["step"] = step
        if not held or (step % hp.save_steps != 0 and step != planned):
            continue
        eval_loss = steps.evaluate()
        state["evals"].append([step, eval_loss])
        say(events.Metric("eval_loss", step, round(eval_loss, 6)))
        if state["best_loss"] is None or eval_loss < state["best_loss"]:
            state.update(best_loss=eval_loss, best_step=step, bad_evals=0)
            if served_in_state:
                state["served"] = steps.snapshot()
            else:
                progress.served = steps.snapshot()
        else:
            state["bad_evals"] += 1
            if patience and state["bad_evals"] >= patience:
                progress.stop_reason = "early_stopping"
                break
    if served_in_state:
        progress.served = state["served"]
    return progress


def save_state(engine: Any, plan: Plan, state: dict[str, Any]) -> None:
    """Save the state a retry resumes from, once every rank has reached it."""
    import torch.distributed as dist

    engine.save_checkpoint(str(plan.work / "state"), tag="state", client_state=state)
    dist.barrier()
