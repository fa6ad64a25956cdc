"""The plan of a run, by the exact formulas of the product API (`002_…`).

    candidate_eval       = floor(selected_examples × 0.05)
    eval_examples        = 0 if candidate_eval < 8 else min(candidate_eval, 512)
    train_examples       = selected_examples − eval_examples
    effective_batch_size = per_device_train_batch_size × gradient_accumulation_steps
    steps_per_epoch      = ceil(train_examples / effective_batch_size)
    planned_steps        = steps_per_epoch × num_train_epochs   (or max_steps)

and the duration admission: projected = workload + 1,800 s, admitted while at most the
execution limit.
"""

from __future__ import annotations

import dataclasses

from trainyard.job.v1 import job_pb2, model_pb2

EVAL_PERCENT = 5
MIN_EVAL = 8
MAX_EVAL = 512
POST_PROCESSING_TOLERANCE_SECONDS = 1800.0


@dataclasses.dataclass(frozen=True)
class Plan:
    selected_examples: int
    train_examples: int
    eval_examples: int
    effective_batch_size: int
    steps_per_epoch: int
    planned_steps: int
    downgrades: tuple[str, ...] = ()


def eval_count(selected: int) -> int:
    candidate = selected * EVAL_PERCENT // 100  # integer floor: no float rounding at the edge
    return 0 if candidate < MIN_EVAL else min(candidate, MAX_EVAL)


def plan(selected: int, hp: job_pb2.Hyperparameters, step_bound: int | None = None) -> Plan:
    """`hp` is expanded: batch settings present, exactly one of epochs or max_steps."""
    evals = eval_count(selected)
    train = selected - evals
    ebs = hp.per_device_train_batch_size * hp.gradient_accumulation_steps
    per_epoch = -(-train // ebs)  # ceil: a partial last batch is still a step
    planned = hp.max_steps if hp.HasField("max_steps") else per_epoch * hp.num_train_epochs
    if step_bound is not None:
        planned = min(planned, step_bound)
    downgrades = []
    if hp.early_stopping_patience > 0 and evals == 0:
        downgrades.append("early_stopping:disabled:no_eval_set")
    return Plan(selected, train, evals, ebs, per_epoch, planned, tuple(downgrades))


def workload_seconds(
    model: model_pb2.DurationModel, planned_steps: int, max_seq_length: int
) -> float:
    per_step = model.reference_step_seconds + (
        (max_seq_length - model.reference_seq_length) * model.step_seconds_per_token
    )
    return model.fixed_seconds + planned_steps * per_step


def projected_active_seconds(workload: float) -> float:
    return workload + POST_PROCESSING_TOLERANCE_SECONDS
