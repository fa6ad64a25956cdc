"""A job's training options (mixed precision, ZeRO and its offload, gradient
checkpointing, the learning-rate schedule, packing): their shape whatever the base, then
what the base's trainer runs and what the job's devices compute. Each refusal names its
field and the values that would be accepted, never the value sent."""

from __future__ import annotations

from services.core import errors
from services.core import validation as v
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import MIXED_PRECISIONS, ZERO_STAGES, Base

SCHEDULES = ("linear", "cosine", "constant")
OFFLOADS = ("none", "cpu")
# The device kinds each precision computes on: fp16 needs an accelerator's half-precision
# units and loss scaling DeepSpeed runs only there; bf16 is correct (if slow) on a CPU.
PRECISION_DEVICES = {
    "fp32": ("cuda", "rocm", "metal", "vulkan", "cpu"),
    "bf16": ("cuda", "rocm", "cpu"),
    "fp16": ("cuda", "rocm"),
}


def check_shape(hp: job_pb2.Hyperparameters) -> None:
    """The options' closed sets and bounds."""
    if hp.HasField("mixed_precision"):
        v.check_one_of("hyperparameters.mixed_precision", hp.mixed_precision, MIXED_PRECISIONS)
    if hp.HasField("zero_stage") and hp.zero_stage not in ZERO_STAGES:
        raise errors.ValidationError(
            "hyperparameters.zero_stage",
            "must be between 0 and 3",
            metadata={"min": str(ZERO_STAGES[0]), "max": str(ZERO_STAGES[-1])},
        )
    if hp.HasField("zero_offload"):
        v.check_one_of("hyperparameters.zero_offload", hp.zero_offload, OFFLOADS)
    if hp.HasField("lr_scheduler_type"):
        v.check_one_of("hyperparameters.lr_scheduler_type", hp.lr_scheduler_type, SCHEDULES)


def _not_run(field: str, supported: tuple[str, ...]) -> errors.ValidationError:
    return errors.ValidationError(
        field, "is not supported by the base model", metadata={"supported": ",".join(supported)}
    )


def turned_on(hp: job_pb2.Hyperparameters) -> list[str]:
    """The options of `TRAINING_OPTIONS` the job turns on."""
    return [
        name
        for name, on in (
            ("gradient_checkpointing", hp.gradient_checkpointing),
            ("packing", hp.packing),
            ("zero_offload", hp.zero_offload not in ("", "none")),
        )
        if on
    ]


def check_support(job: job_pb2.Job, base: Base) -> None:
    """What the base's trainer runs, and what the devices the job may run on compute."""
    hp = job.hyperparameters
    if hp.HasField("mixed_precision") and hp.mixed_precision not in base.mixed_precisions:
        raise _not_run("hyperparameters.mixed_precision", base.mixed_precisions)
    if hp.HasField("zero_stage") and hp.zero_stage not in base.zero_stages:
        raise _not_run("hyperparameters.zero_stage", tuple(str(s) for s in base.zero_stages))
    for name in turned_on(hp):
        if name not in base.options:
            raise _not_run(f"hyperparameters.{name}", base.options)
    stage = hp.zero_stage if hp.HasField("zero_stage") else int(base.defaults["zero_stage"])
    if hp.zero_offload == "cpu" and stage < 1:
        raise errors.ValidationError(
            "hyperparameters.zero_offload",
            "offloads ZeRO's optimizer state: it needs zero_stage 1 or above",
            metadata={"min_zero_stage": "1"},
        )
    devices = tuple(job.resources.devices) or base.devices
    if hp.HasField("mixed_precision") and not set(devices) & set(
        PRECISION_DEVICES[hp.mixed_precision]
    ):
        runnable = tuple(
            p for p in base.mixed_precisions if set(devices) & set(PRECISION_DEVICES[p])
        )
        raise errors.ValidationError(
            "hyperparameters.mixed_precision",
            "needs a device the job may not run on (fp16 runs on cuda or rocm, not a CPU)",
            metadata={"supported": ",".join(runnable)},
        )
