"""The model catalog: each trainable base with its profile and support table.

`GET /v1/train/models` is answered from these objects and create validation reads the
same ones, so the catalog and the validator cannot disagree.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from trainyard.job.v1 import job_pb2, model_pb2
from trainyard.training import decisions, families, model_files, pins, planning

FIXTURE_BASE = "fixture-tiny-llm"


FIXTURE_DATASET = "fixture:synthetic-tiny-v1"

MIXED_PRECISIONS = ("fp32", "bf16", "fp16")
ZERO_STAGES = (0, 1, 2, 3)
# The options a job turns on that a base's trainer runs or not, by their hyperparameter.
TRAINING_OPTIONS = ("gradient_checkpointing", "packing", "zero_offload")
# What a job leaves of the training options out is filled with: every one off, the
# learning rate held after its warm-up (what every job ran before they existed).
OPTION_DEFAULTS: Mapping[str, float | int | str] = {
    "mixed_precision": "fp32",
    "zero_stage": 0,
    "zero_offload": "none",
    "gradient_checkpointing": False,
    "lr_scheduler_type": "constant",
    "packing": False,
}

# What a caller naming a base the catalog lacks is told: where approved bases are listed
# and how an operator adds one (the directory by its setting, never by its path).
UNKNOWN_BASE_MESSAGE = (
    "Field base_model is not an approved base model. GET /v1/train/models lists the "
    "approved ones; a Hugging Face causal LM placed in the deployment's models directory "
    "(TRAINYARD_MODELS_DIR) is listed there without a restart."
)


@dataclasses.dataclass(frozen=True)
class FixtureArchitecture:
    """The built-in model's shape: a small Llama-style causal LM over bytes."""

    vocab_size: int = 259  # 256 bytes plus pad, bos, eos
    hidden_size: int = 256
    intermediate_size: int = 1024
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = 2048

    @property
    def parameters(self) -> int:
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        kv = h // self.num_attention_heads * self.num_key_value_heads
        per_layer = h * h * 2 + h * kv * 2 + 3 * h * i + 2 * h
        return self.num_hidden_layers * per_layer + 2 * v * h + h


@dataclasses.dataclass(frozen=True)
class Base:
    """One trainable base: its catalog entry, defaults and bounds."""

    name: str
    # A built-in base's revision; a local base's is its files' sha256 (`revision`).
    version: str
    description: str
    parameters: int
    defaults: Mapping[str, float | int | str]
    adaptation: Mapping[str, object]
    ranges: Mapping[str, tuple[float, float]]
    adaptations: tuple[str, ...]
    outputs: tuple[str, ...]
    devices: tuple[str, ...]
    datasets: tuple[str, ...]
    loss_masks: tuple[str, ...] = ("assistant_only", "full_sequence")
    precisions: tuple[str, ...] = ("fp32", "bf16")
    targets: tuple[str, ...] = ()
    # The modules a LoRA adapter wraps when a job or client names none (its family's).
    default_targets: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    zero_stage: int = 0
    # What `hyperparameters.mixed_precision` and `zero_stage` may name on it.
    mixed_precisions: tuple[str, ...] = MIXED_PRECISIONS
    zero_stages: tuple[int, ...] = ZERO_STAGES
    # The training options its trainer runs when a job turns them on (TRAINING_OPTIONS).
    options: tuple[str, ...] = TRAINING_OPTIONS
    duration: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # The seconds a run of this base most likely spends after training (saving, merging,
    # uploading): what its expected price adds. Admission's ceiling keeps `002_…`'s
    # tolerance (planning.POST_PROCESSING_TOLERANCE_SECONDS) whatever the base.
    post_processing_seconds: float = planning.POST_PROCESSING_TOLERANCE_SECONDS
    # Where a local base's weights lie; never answered by the API.
    path: str = ""
    # The built-in datasets it reads (`fixture:…`).
    fixtures: tuple[str, ...] = (FIXTURE_DATASET,)
    # What its rows are: `chat` (messages) or `decision` (a state and one question).
    rows: str = "chat"
    # The suites `protect.suites` may name: those the base already answers.
    protectable: tuple[str, ...] = ()
    output: str = ""
    # The most machines (`resources.machines`) one job on it trains across.
    machines: int = 16

    @property
    def revision(self) -> str:
        """What a job pins: a built-in base's version, or the sha256 of a local base's files
        as they are now (`pins`: hashed when first asked for in a process, so a trainer
        that never asks never reads a base's bytes twice)."""
        if not self.path:
            return self.version
        try:
            return pins.revision(Path(self.path))
        except OSError:  # taken away while it was read: there is nothing to pin
            return ""

    @property
    def serves_clients(self) -> bool:
        """Whether a training client may load it: a language model an engine trains LoRA
        on (HIP-1333 §4's engine row)."""
        return self.rows == "chat" and "lora" in self.adaptations

    def default_output_kind(self, mode: str) -> str:
        if self.output:
            return self.output
        return "lora" if mode in ("lora", "qlora") else "checkpoint"

    def to_proto(self) -> model_pb2.BaseModel:
        defaults = job_pb2.Hyperparameters(**self.defaults)  # type: ignore[arg-type]
        return model_pb2.BaseModel(
            name=self.name,
            revision=self.revision,
            description=self.description,
            parameters=self.parameters,
            profile=model_pb2.ModelProfile(
                defaults=defaults,
                adaptation=job_pb2.Adaptation(**self.adaptation),  # type: ignore[arg-type]
                objective=job_pb2.Objective(loss="cross_entropy", loss_mask=self.loss_masks[0]),
                output=job_pb2.Output(kind=self.default_output_kind(str(self.adaptation["mode"]))),
                ranges=[
                    model_pb2.FieldRange(field=field, min=lo, max=hi)
                    for field, (lo, hi) in sorted(self.ranges.items())
                ],
                zero_stage=self.zero_stage,
                duration=model_pb2.DurationModel(**self.duration),  # type: ignore[arg-type]
            ),
            support=model_pb2.SupportTable(
                adaptations=self.adaptations,
                protect=self.protect,
                terms=self.terms,
                outputs=self.outputs,
                datasets=self.datasets,
                devices=self.devices,
                loss_masks=self.loss_masks,
                base_load_precisions=self.precisions,
                evaluation_suites=self.suites,
                targets=self.targets,
                default_targets=self.default_targets,
                nouns=("job", "client") if self.serves_clients else ("job",),
                machines=self.machines,
                mixed_precisions=self.mixed_precisions,
                zero_stages=self.zero_stages,
                options=self.options,
            ),
        )


FIXTURE = Base(
    name=FIXTURE_BASE,
    version="v1",
    description="A small Llama-style causal LM over bytes, built from a config with a seeded "
    "init; trains on a CPU in seconds.",
    parameters=FixtureArchitecture().parameters,
    defaults={
        "num_train_epochs": 3,
        "learning_rate": 1e-3,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "warmup_steps": 0,
        "max_seq_length": 256,
        "early_stopping_patience": 0,
        "base_load_precision": "fp32",
        "save_steps": 10,
        "seed": 0,
        "weight_decay": 0.0,
        **OPTION_DEFAULTS,
    },
    adaptation={"mode": "full"},
    ranges={
        "hyperparameters.num_train_epochs": (1, 100),
        "hyperparameters.max_steps": (1, 100),
        "hyperparameters.learning_rate": (1e-7, 1.0),
        "hyperparameters.per_device_train_batch_size": (1, 64),
        "hyperparameters.gradient_accumulation_steps": (1, 64),
        "hyperparameters.warmup_steps": (0, 1000),
        "hyperparameters.max_seq_length": (16, 2048),
        "hyperparameters.early_stopping_patience": (0, 100),
        "hyperparameters.save_steps": (1, 1000),
        "hyperparameters.seed": (0, 2**31 - 1),
        "hyperparameters.weight_decay": (0.0, 1.0),
        "hyperparameters.zero_stage": (0, 3),
        "adaptation.rank": (1, 256),
        "adaptation.alpha": (1, 1024),
    },
    adaptations=("full", "lora", "auto"),
    outputs=("checkpoint", "lora", "capability"),
    devices=("cpu", "cuda"),
    datasets=("fixture", "artifact", "s3", "hf"),
    targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    default_targets=families.LORA_TARGETS["llama"],
    zero_stage=0,
    duration={
        "fixed_seconds": 30.0,
        "reference_seq_length": 256,
        "reference_step_seconds": 0.5,
        "step_seconds_per_token": 0.002,
    },  # Saving a checkpoint of a few megabytes and uploading it: seconds.
    post_processing_seconds=5.0,
)


DECIDER_BASE = "fixture-tiny-decider"
# What a LoRA adapter is when a job or a client leaves its settings out; its targets are
# the base's `default_targets`.
LORA_DEFAULTS: Mapping[str, int] = {"rank": 8, "alpha": 16}


@dataclasses.dataclass(frozen=True)
class DeciderArchitecture:
    """The built-in decision model's shape (executor/decider.py builds it): hashed
    character trigrams into a bag of embeddings, a residual MLP, a bilinear head."""

    buckets: int = 2048
    dim: int = 64
    hidden: int = 128

    @property
    def parameters(self) -> int:
        d, h = self.dim, self.hidden
        return self.buckets * d + (d * h + h + h * d + d) + d * d + d


# HIP-1333 §4's decision row (the `kai` row), played on CPU by a model built in code.
DECIDER = Base(
    name=DECIDER_BASE,
    version="v1",
    description="A small decision model over text, built from a seeded recipe: answers "
    "choice, score and noul questions about a state; knows the sentiment, topic and spam "
    "suites.",
    parameters=DeciderArchitecture().parameters,
    defaults={
        "num_train_epochs": 3,
        "learning_rate": 0.1,
        "per_device_train_batch_size": 16,
        "gradient_accumulation_steps": 1,
        "warmup_steps": 0,
        "max_seq_length": 256,
        "early_stopping_patience": 0,
        "base_load_precision": "fp32",
        "save_steps": 10,
        "seed": 0,
        "weight_decay": 0.0,
        **OPTION_DEFAULTS,
    },
    adaptation={"mode": "readout"},
    ranges=FIXTURE.ranges,
    adaptations=("full", "readout", "auto"),
    outputs=("checkpoint", "capability"),
    devices=("cpu", "cuda"),
    datasets=("fixture", "artifact", "s3", "hf"),
    loss_masks=("assistant_only",),
    precisions=("fp32",),
    # Its trainer is one process over a model of a few hundred thousand weights: fp32,
    # nothing partitioned, no activations worth recomputing, no sequences to pack.
    mixed_precisions=("fp32",),
    zero_stages=(0,),
    options=(),
    protect=("suites", "projection", "distillation"),
    terms=("pairwise_margin", "hard_margin", "consistency"),
    suites=tuple(decisions.SUITES),
    zero_stage=0,
    duration={
        "fixed_seconds": 20.0,
        "reference_seq_length": 256,
        "reference_step_seconds": 0.05,
        "step_seconds_per_token": 0.0,
    },
    post_processing_seconds=5.0,
    fixtures=(decisions.FIXTURE_DATASET,),
    rows="decision",
    protectable=decisions.KNOWN_SUITES,
    output="capability",
    # Its trainer is one process: the pair terms see the whole batch at once.
    machines=1,
)


LOCAL_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def local_base(directory: Path) -> Base | None:
    """A Hugging Face causal LM saved in `directory`, when it is one: a config naming a
    `…ForCausalLM`, safetensors weights and a tokenizer. Its revision is the sha256 of its
    files (`pins`); its targets are its decoder layers' linear modules, and its default
    targets its family's (`families`)."""
    name = directory.name.lower()
    config_path = directory / "config.json"
    weights = sorted(directory.glob("*.safetensors"))
    if (
        not LOCAL_NAME.match(name)
        or name in (FIXTURE_BASE, DECIDER_BASE)
        or not config_path.is_file()
        or not weights
    ):
        return None
    if not (directory / "tokenizer.json").is_file():
        return None
    try:
        config = json.loads(config_path.read_text())
        tensors = {k: v for w in weights for k, v in model_files.safetensors_header(w).items()}
    except (ValueError, OSError):
        return None
    if not any(str(a).endswith("ForCausalLM") for a in config.get("architectures", [])):
        return None
    parameters = sum(math.prod(t["shape"]) for t in tensors.values())
    targets = families.targetable(tensors)
    family = str(config.get("model_type", "causal"))
    longest = int(config.get("max_position_embeddings", 2048))
    return Base(
        name=name,
        version="",
        description=f"A {family} language model found on this deployment's disk.",
        parameters=parameters,
        defaults={**FIXTURE.defaults, "learning_rate": 2e-4, "max_seq_length": min(512, longest)},
        adaptation={"mode": "lora"},
        ranges={**FIXTURE.ranges, "hyperparameters.max_seq_length": (16, longest)},
        adaptations=("full", "lora", "auto"),
        outputs=FIXTURE.outputs,
        devices=FIXTURE.devices,
        datasets=FIXTURE.datasets,
        targets=targets,
        default_targets=families.default_targets(family, targets),
        duration={
            "fixed_seconds": 120.0,
            "reference_seq_length": 512,
            "reference_step_seconds": max(1.0, parameters / 2e8),
            "step_seconds_per_token": max(0.002, parameters / 1e11),
        },
        # Saving and uploading an adapter or checkpoint of the base's size.
        post_processing_seconds=60.0 + parameters / 1e8,
        path=str(directory),
    )


def _pin_all(bases: list[Base]) -> None:
    for base in bases:
        _ = base.revision  # hashed once; later reads find each file's digest kept


class Catalog:
    """The bases this deployment trains. With a models directory it follows that
    directory, so a model placed there (or taken away) counts without a restart: its
    listing is compared at every listing and whenever a name it does not know is asked
    for, and at most `model_files.RESCAN_SECONDS` apart when a known name is."""

    def __init__(
        self,
        bases: tuple[Base, ...] = (FIXTURE, DECIDER),
        *,
        models_dir: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        hash_ahead: bool = False,
    ) -> None:
        """`hash_ahead`: hash each local base found in the background, so the create that
        pins it does not wait for a large base's bytes to be read."""
        self._built_in = bases
        self._hash_ahead = hash_ahead
        self._models_dir = models_dir
        self._clock = clock
        self._seen: model_files.Listing | None = None
        self._read_at = -math.inf
        self._bases = {base.name: base for base in bases}
        self._rescan()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Catalog:
        """The catalog of this machine's environment (`TRAINYARD_MODELS_DIR`)."""
        return cls.discover(model_files.models_dir(env))

    @classmethod
    def discover(cls, models_dir: Path | None, *, hash_ahead: bool = False) -> Catalog:
        """The fixture and every Hugging Face causal LM found under `models_dir`."""
        return cls(models_dir=models_dir, hash_ahead=hash_ahead)

    def _rescan(self) -> None:
        """Read the models directory again when its listing changed since the last read."""
        if self._models_dir is None:
            return
        self._read_at = self._clock()
        listing = model_files.listing(self._models_dir)
        if listing == self._seen:
            return
        found = [b for name, _ in listing if (b := local_base(self._models_dir / name)) is not None]
        self._bases = {base.name: base for base in (*self._built_in, *found)}
        self._seen = listing
        if self._hash_ahead and found:
            threading.Thread(target=_pin_all, args=(found,), name="pins", daemon=True).start()

    def _rescan_when_stale(self) -> None:
        if self._clock() - self._read_at >= model_files.RESCAN_SECONDS:
            self._rescan()

    def get(self, name: str) -> Base | None:
        if name not in self._bases:
            self._rescan()
        else:
            self._rescan_when_stale()
        return self._bases.get(name)

    @property
    def names(self) -> list[str]:
        self._rescan()
        return sorted(self._bases)

    def to_proto(self) -> list[model_pb2.BaseModel]:
        self._rescan()
        bases = self._bases
        return [bases[name].to_proto() for name in sorted(bases)]
