"""The plan of a run, by the exact formulas of the product API (`002_…`).

    candidate_eval       = floor(selected_examples × 0.05)
    eval_examples        = 0 if candidate_eval < 8 else min(candidate_eval, 512)
    train_examples       = selected_examples − eval_examples
    effective_batch_size = per_device_train_batch_size × gradient_accumulation_steps
    steps_per_epoch      = ceil(train_examples / effective_batch_size)
    planned_steps        = steps_per_epoch × num_train_epochs   (or max_steps)

The count the formula splits (the product API's `selected_examples`) is the selected
chats that have something to train on, so the plan calls it `trainable_examples`. The
formula is the policy's aim ("tenta destinar 5%"); which examples are held out follows
from each one's identity (`datasets.eval_ids`), so a job freezes the count its rows give.

And the duration admission: projected = workload + 1,800 s, admitted while at most the
execution limit.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from trainyard.job.v1 import job_pb2, model_pb2

EVAL_PERCENT = 5
MIN_EVAL = 8
MAX_EVAL = 512
POST_PROCESSING_TOLERANCE_SECONDS = 1800.0


@dataclasses.dataclass(frozen=True)
class Plan:
    trainable_examples: int
    train_examples: int
    eval_examples: int
    effective_batch_size: int
    steps_per_epoch: int
    planned_steps: int
    downgrades: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class FrozenPlan(Plan):
    """A plan as a job froze it, with the active seconds its create projected."""

    projected_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """What a job's row keeps. The trainable count is stored under the name the product
        API's formula gives the count it splits, `selected_examples`, as rows always had."""
        stored = dataclasses.asdict(self)
        stored = {"selected_examples": stored.pop("trainable_examples"), **stored}
        stored["downgrades"] = list(self.downgrades)
        return stored

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> FrozenPlan:
        """A stored plan, typed; a tombstone's (empty) reads as zeros."""
        return cls(
            trainable_examples=int(stored.get("selected_examples", 0)),
            train_examples=int(stored.get("train_examples", 0)),
            eval_examples=int(stored.get("eval_examples", 0)),
            effective_batch_size=int(stored.get("effective_batch_size", 0)),
            steps_per_epoch=int(stored.get("steps_per_epoch", 0)),
            planned_steps=int(stored.get("planned_steps", 0)),
            downgrades=tuple(stored.get("downgrades", ())),
            projected_seconds=float(stored.get("projected_seconds", 0.0)),
        )


def eval_count(selected: int) -> int:
    candidate = selected * EVAL_PERCENT // 100  # integer floor: no float rounding at the edge
    return 0 if candidate < MIN_EVAL else min(candidate, MAX_EVAL)


def plan(
    trainable: int,
    hp: job_pb2.Hyperparameters,
    step_bound: int | None = None,
    evals: int | None = None,
) -> Plan:
    """`hp` is expanded: batch settings present, exactly one of epochs or max_steps.
    `evals` is the holdout the rows chose (chats by identity, decisions by state);
    without it the product API's formula sizes it."""
    if evals is None:
        evals = eval_count(trainable)
    train = trainable - evals
    ebs = hp.per_device_train_batch_size * hp.gradient_accumulation_steps
    per_epoch = -(-train // ebs)  # ceil: a partial last batch is still a step
    planned = hp.max_steps if hp.HasField("max_steps") else per_epoch * hp.num_train_epochs
    if step_bound is not None:
        planned = min(planned, step_bound)
    downgrades = []
    if hp.early_stopping_patience > 0 and evals == 0:
        downgrades.append("early_stopping:disabled:no_eval_set")
    return Plan(trainable, train, evals, ebs, per_epoch, planned, tuple(downgrades))


def workload_seconds(
    model: model_pb2.DurationModel, planned_steps: int, max_seq_length: int
) -> float:
    return model.fixed_seconds + planned_steps * step_seconds(model, max_seq_length)


def projected_active_seconds(workload: float) -> float:
    return workload + POST_PROCESSING_TOLERANCE_SECONDS


def step_seconds(model: model_pb2.DurationModel, max_seq_length: int) -> float:
    """Seconds per optimizer step at `max_seq_length`, by the profile."""
    return model.reference_step_seconds + (
        (max_seq_length - model.reference_seq_length) * model.step_seconds_per_token
    )


def measured_step_seconds(runs: Sequence[tuple[float, int]]) -> float | None:
    """Seconds per step that finished runs took, as (their trainer's seconds from its loop's
    start, steps) pairs: the median of each run's. None without a run to learn from."""
    rates = [seconds / steps for seconds, steps in runs if steps > 0 and seconds > 0]
    return statistics.median(rates) if rates else None


def expected_seconds(
    model: model_pb2.DurationModel,
    planned_steps: int,
    max_seq_length: int,
    post_processing_seconds: float,
    measured: float | None = None,
) -> float:
    """The device-seconds a run will most likely be charged (what its expected price is
    for): each step at the measured time where there is one (else the profile's), and the
    base's own post-processing. Loading the base comes before the loop starts and is never
    charged, so the profile's fixed seconds are admission's alone, as is `002_…`'s
    tolerance (`projected_active_seconds`)."""
    per_step = step_seconds(model, max_seq_length) if measured is None else measured
    return planned_steps * per_step + post_processing_seconds
