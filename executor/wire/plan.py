"""The plan a trainer runs, typed: read once from `task.json` (the job as the runner wrote
it with `MessageToDict`, the task, and where the inputs and outputs lie).

Proto JSON leaves a field at its zero value out, so a missing field reads as its zero,
except where the trainers have always read another default (`save_steps` 10, a term's
weight 1 and margin 0.5, the loss mask `assistant_only`). `max_steps` is the one whose
presence matters: a job that set it stops for `max_steps`, not `completed`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    learning_rate: float = 0.0
    weight_decay: float = 0.0
    warmup_steps: int = 0
    per_device_train_batch_size: int = 0
    max_seq_length: int = 0
    seed: int = 0
    save_steps: int = 10
    early_stopping_patience: int = 0
    max_steps: int | None = None
    # The dtype the base's weights are held in while training: `fp32` or `bf16`.
    base_load_precision: str = "fp32"
    gradient_accumulation_steps: int = 1
    # The training options; a job frozen before they existed reads as it ran: fp32,
    # ZeRO 0, the rate held after warm-up, nothing else turned on.
    mixed_precision: str = "fp32"
    zero_stage: int = 0
    zero_offload: str = "none"
    gradient_checkpointing: bool = False
    lr_scheduler_type: str = "constant"
    packing: bool = False

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Hyperparameters:
        max_steps = doc.get("max_steps")
        return cls(
            learning_rate=float(doc.get("learning_rate", 0.0)),
            weight_decay=float(doc.get("weight_decay", 0.0)),
            warmup_steps=int(doc.get("warmup_steps", 0)),
            per_device_train_batch_size=int(doc.get("per_device_train_batch_size", 0)),
            max_seq_length=int(doc.get("max_seq_length", 0)),
            seed=int(doc.get("seed", 0)),
            save_steps=int(doc.get("save_steps", 10)),
            early_stopping_patience=int(doc.get("early_stopping_patience", 0)),
            max_steps=None if max_steps is None else int(max_steps),
            base_load_precision=str(doc.get("base_load_precision") or "fp32"),
            gradient_accumulation_steps=int(doc.get("gradient_accumulation_steps") or 1),
            mixed_precision=str(doc.get("mixed_precision") or "fp32"),
            zero_stage=int(doc.get("zero_stage", 0)),
            zero_offload=str(doc.get("zero_offload") or "none"),
            gradient_checkpointing=bool(doc.get("gradient_checkpointing", False)),
            lr_scheduler_type=str(doc.get("lr_scheduler_type") or "constant"),
            packing=bool(doc.get("packing", False)),
        )


@dataclasses.dataclass(frozen=True)
class Adaptation:
    mode: str = ""
    rank: int = 0
    alpha: int = 0
    targets: tuple[str, ...] = ()
    # As the job spelled it: an output's metadata repeats it word for word.
    doc: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Adaptation:
        return cls(
            mode=str(doc.get("mode", "")),
            rank=int(doc.get("rank", 0)),
            alpha=int(doc.get("alpha", 0)),
            targets=tuple(str(t) for t in doc.get("targets") or ()),
            doc=dict(doc),
        )


@dataclasses.dataclass(frozen=True)
class Term:
    """One weighted term of a decision objective."""

    kind: str
    weight: float = 1.0
    margin: float = 0.5

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Term:
        weight, margin = doc.get("weight"), doc.get("margin")
        return cls(
            kind=str(doc["kind"]),
            weight=1.0 if weight is None else float(weight),
            margin=0.5 if margin is None else float(margin),
        )


@dataclasses.dataclass(frozen=True)
class Protect:
    """What a decision job keeps: the suites, how, and within what budget."""

    suites: tuple[str, ...] = ()
    # None: no projection; else the share of each protected direction it removes.
    projection: float | None = None
    distillation: bool = False
    # The bounds the budget sets, of `accuracy` and `ece`; an absent one does not bind.
    budget: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # As the job spelled it: a capability's metadata repeats it word for word.
    doc: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Protect:
        projection = doc.get("projection")
        strength = (projection or {}).get("strength")
        budget = doc.get("budget") or {}
        return cls(
            suites=tuple(str(s) for s in doc.get("suites") or ()),
            projection=None if projection is None else 1.0 if strength is None else float(strength),
            distillation=bool(doc.get("distillation")),
            budget={k: float(budget[k]) for k in ("accuracy", "ece") if budget.get(k) is not None},
            doc=dict(doc),
        )


@dataclasses.dataclass(frozen=True)
class Job:
    """The parts of the job a trainer reads."""

    id: str = ""
    base_model: str = ""
    revision: str = ""
    planned_steps: int = 0
    effective_batch_size: int = 0
    hyperparameters: Hyperparameters = Hyperparameters()
    adaptation: Adaptation = Adaptation()
    dataset_uri: str = ""
    dataset_tags: tuple[str, ...] = ()
    system_prompt: str = ""
    loss_mask: str = "assistant_only"
    terms: tuple[Term, ...] = ()
    protect: Protect = Protect()
    evaluation_suites: tuple[str, ...] = ()
    # The snapshot's sha256 the job froze at preparation ("" before snapshots existed).
    snapshot_sha256: str = ""
    output_kind: str = ""

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Job:
        dataset = doc.get("dataset") or {}
        objective = doc.get("objective") or {}
        return cls(
            id=str(doc.get("id", "")),
            base_model=str(doc.get("base_model", "")),
            revision=str(doc.get("revision", "")),
            planned_steps=int(doc.get("planned_steps") or 0),
            effective_batch_size=int(doc.get("effective_batch_size") or 0),
            hyperparameters=Hyperparameters.of(doc.get("hyperparameters") or {}),
            adaptation=Adaptation.of(doc.get("adaptation") or {}),
            dataset_uri=str(dataset.get("uri", "")),
            dataset_tags=tuple(str(t) for t in dataset.get("tags") or ()),
            system_prompt=str(dataset.get("system_prompt", "")),
            loss_mask=str(objective.get("loss_mask", "assistant_only")),
            terms=tuple(Term.of(t) for t in objective.get("terms") or ()),
            protect=Protect.of(doc.get("protect") or {}),
            evaluation_suites=tuple(
                str(s) for s in (doc.get("evaluation") or {}).get("suites") or ()
            ),
            snapshot_sha256=str((doc.get("preparation") or {}).get("snapshot_sha256", "")),
            output_kind=str((doc.get("output") or {}).get("kind", "")),
        )


@dataclasses.dataclass(frozen=True)
class Task:
    role: str = "lead"
    rank: int = 0
    world_size: int = 1
    # The lead's `host:port`, for a join.
    coordinator: str = ""

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Task:
        return cls(
            role=str(doc.get("role", "lead")),
            rank=int(doc.get("rank", 0)),
            world_size=int(doc.get("world_size", 1)),
            coordinator=str(doc.get("coordinator", "")),
        )


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a trainer process does."""

    job: Job
    task: Task
    output_dir: Path
    # The task's work directory: where task.json lies and the state is saved.
    work: Path
    snapshot_path: Path | None = None
    resume_dir: Path | None = None
    # The unpacked adapter the job's `from` names: its LoRA starts from those weights.
    init_adapter_dir: Path | None = None

    @property
    def lead(self) -> bool:
        return self.task.rank == 0

    @classmethod
    def load(cls, task_file: str | Path) -> Plan:
        path = Path(task_file)
        spec = json.loads(path.read_text())

        def optional(key: str) -> Path | None:
            return Path(spec[key]) if spec.get(key) else None

        return cls(
            job=Job.of(spec["job"]),
            task=Task.of(spec.get("task") or {}),
            output_dir=Path(spec["output_dir"]),
            work=path.resolve().parent,
            snapshot_path=optional("snapshot_path"),
            resume_dir=optional("resume_dir"),
            init_adapter_dir=optional("init_adapter_dir"),
        )
