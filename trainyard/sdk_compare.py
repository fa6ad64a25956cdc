"""The SDK's run comparison: a few jobs side by side, as the console's compare page shows
them. Each job's frozen config is flattened to dotted paths (`hyperparameters.
learning_rate`, `adaptation.rank`, …) and the paths whose values differ are kept, with a
value per job; each job's run is summed up in a row (status, steps, losses, tokens seen,
cost, stop reason) beside its loss curves. `trainyard.sdk.Client.compare_jobs` has it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from google.protobuf.message import Message

from trainyard.job.v1 import event_pb2, job_pb2

# How many jobs one comparison holds: a chart of more curves is not read.
MIN_COMPARED, MAX_COMPARED = 2, 6
# A job's frozen config: its spec as expanded from the base's profile and frozen at
# create, and the plan derived from it. Not its labels (`idempotency_key`,
# `requested_by`, `output.name`: they name the request and its output, and a default
# output name is the job's own, `<project>-<number>`), nor what the run reported.
CONFIG_FIELDS = (
    "project", "base_model", "revision", "from", "dataset", "objective", "adaptation",
    "hyperparameters", "protect", "evaluation", "resources", "output", "retention",
    "planned_steps", "steps_per_epoch", "effective_batch_size", "train_examples",
    "eval_examples",
)  # fmt: skip
# Of the `evaluation` block, what the job asked for; the rest is what the run reported.
ASKED_EVALUATION = ("suites",)
# The labels inside the config's blocks.
LABELS = {"output": ("name",)}
# The series a comparison reads of each job: the curves, and the tokens-seen axis.
SERIES = ("loss", "eval_loss", "tokens_seen")


def plain(message: Message) -> dict[str, Any]:
    """A message as the REST face writes it, in Python values: every field without
    presence (zero values too), every set one with it, enums by name, 64-bit integers
    as integers (the proto JSON mapping would make them strings)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.has_presence and not message.HasField(field.name):
            continue
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = {k: _value(field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_value(field, v) for v in value]
        else:
            out[field.name] = _value(field, value)
    return out


def _value(field: Any, value: Any) -> Any:
    if isinstance(value, Message):
        return plain(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value


def config_of(job: job_pb2.Job) -> dict[str, Any]:
    """The job's frozen config (`CONFIG_FIELDS`), as the REST face writes those fields."""
    read = plain(job)
    config = {name: read[name] for name in CONFIG_FIELDS if name in read}
    # Whether or not the run reported an evaluation block (REST writes `null` until it
    # does), what it asked for is there.
    asked = plain(job.evaluation)
    config["evaluation"] = {k: asked[k] for k in ASKED_EVALUATION}
    for block, names in LABELS.items():
        if block in config:
            config[block] = {k: v for k, v in config[block].items() if k not in names}
    return {name: config[name] for name in CONFIG_FIELDS if name in config}


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted paths to values, in the config's order: `{"adaptation": {"rank": 8}}` is
    `{"adaptation.rank": 8}`. A list of plain values (`adaptation.targets`) is one value;
    a list of objects is numbered (`objective.terms.0.kind`); an empty object or list of
    objects adds no path."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        elif isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
            out.update(flatten({str(i): v for i, v in enumerate(value)}, f"{path}."))
        else:
            out[path] = value
    return out


def differences(configs: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """`{path: [value per job]}` for each path whose value is not the same in every flat
    config (a path a config lacks is None there), in the order the paths first appear."""
    paths = dict.fromkeys(path for config in configs for path in config)
    found: dict[str, list[Any]] = {}
    for path in paths:
        values = [config.get(path) for config in configs]
        if any(v != values[0] for v in values[1:]):
            found[path] = values
    return found


def label_of(job: job_pb2.Job) -> str:
    """A job as a legend names it: its number, project (when it has one) and base."""
    return " ".join(filter(None, [f"#{job.number}", job.project, job.base_model]))


Points = list[tuple[int, float]]


@dataclasses.dataclass(frozen=True)
class Run:
    """One compared job: how its run went, and its curves."""

    job: job_pb2.Job
    label: str
    status: str
    step: int
    planned_steps: int
    final_loss: float | None  # the last step's train loss
    best_loss: float | None  # the lowest train loss, at `best_step`
    best_step: int | None
    eval_loss: float | None  # the best evaluation's loss, at `eval_step`
    eval_step: int | None
    tokens_seen: int | None  # the tokens trained through the last step
    cost_micro_cents: int
    stop_reason: str
    # `loss`, `eval_loss` and `tokens_seen` by step, as the metrics read answers them.
    series: dict[str, Points]

    @classmethod
    def of(cls, job: job_pb2.Job, series: Sequence[event_pb2.MetricSeries]) -> Run:
        curves: dict[str, Points] = {name: [] for name in SERIES}
        for one in series:
            curves[one.name] = [(p.step, p.value) for p in one.points]
        loss, tokens = curves["loss"], curves["tokens_seen"]
        best = min(loss, key=lambda p: (p[1], p[0])) if loss else None
        evaluation = job.evaluation
        progress = job.progress
        return cls(
            job=job,
            label=label_of(job),
            status=job.status,
            step=progress.step,
            planned_steps=job.planned_steps,
            final_loss=progress.loss if progress.HasField("loss") else None,
            best_loss=best[1] if best else None,
            best_step=best[0] if best else None,
            eval_loss=evaluation.best_loss if evaluation.HasField("best_loss") else None,
            eval_step=evaluation.best_step if evaluation.HasField("best_step") else None,
            tokens_seen=int(tokens[-1][1]) if tokens else None,
            cost_micro_cents=job.cost_micro_cents,
            stop_reason=job.outcome.stop_reason if job.HasField("outcome") else "",
            series=curves,
        )


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Jobs side by side: a run per job, each job's flat config, and where they differ."""

    runs: list[Run]
    configs: list[dict[str, Any]]
    # {path: [value per job, in the runs' order]}, only the paths that differ.
    differences: dict[str, list[Any]]

    @classmethod
    def of(
        cls, reads: Sequence[tuple[job_pb2.Job, Sequence[event_pb2.MetricSeries]]]
    ) -> Comparison:
        configs = [flatten(config_of(job)) for job, _ in reads]
        return cls([Run.of(job, series) for job, series in reads], configs, differences(configs))


def checked_ids(job_ids: Sequence[str]) -> list[str]:
    """The ids of a comparison: 2 to 6 of them, none twice; a ValueError otherwise."""
    if not MIN_COMPARED <= len(job_ids) <= MAX_COMPARED:
        raise ValueError(f"compare {MIN_COMPARED} to {MAX_COMPARED} job ids")
    if len(set(job_ids)) != len(job_ids):
        raise ValueError("a job id is given twice")
    return list(job_ids)


class CompareMethods:
    """The comparison of `Client`, which supplies `get_job` and `metrics`."""

    def get_job(self, job_id: str, *, by_number: bool = False, project: str = "") -> job_pb2.Job:
        raise NotImplementedError

    def metrics(
        self, job_id: str, *names: str, max_points: int = 0
    ) -> list[event_pb2.MetricSeries]:
        raise NotImplementedError

    def compare_jobs(self, *job_ids: str) -> Comparison:
        """Compare 2 to 6 jobs: `differences` holds `{path: [value per job]}` for each
        config path they do not share, `runs` a row per job with its curves."""
        return Comparison.of(list(self._reads(checked_ids(job_ids))))

    def _reads(
        self, job_ids: Sequence[str]
    ) -> Iterator[tuple[job_pb2.Job, list[event_pb2.MetricSeries]]]:
        for job_id in job_ids:
            yield self.get_job(job_id), self.metrics(job_id, *SERIES)
