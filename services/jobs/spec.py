"""A job spec checked in HIP-1333 §3's order (shape, base, agreement, support) and
expanded from its base's profile into the frozen form every later read shows."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable

from google.protobuf import json_format

from services.core import errors, retention
from services.core import validation as v
from services.jobs import options, remote
from trainyard.job.v1 import job_pb2
from trainyard.training import decisions
from trainyard.training.catalog import (
    FIXTURE_DATASET,
    LORA_DEFAULTS,
    UNKNOWN_BASE_MESSAGE,
    Base,
    Catalog,
)

MODES = ("full", "lora", "qlora", "readout", "basis", "auto")
LOSS_MASKS = ("assistant_only", "full_sequence")
TERMS = ("pairwise_margin", "hard_margin", "consistency")
OUTPUTS = ("checkpoint", "lora", "capability", "basis", "merged")
DEVICES = ("cuda", "rocm", "metal", "vulkan", "cpu")
PRECISIONS = ("fp32", "bf16", "fp16", "8bit", "4bit")
BASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$")
ARTIFACT_URI = "artifact:"
DEFAULT_PROJECT = "default"


FIXTURES = (FIXTURE_DATASET, decisions.FIXTURE_DATASET)
# The roles `dataset.splits` maps to a source's named splits (HIP-1333 §3), and the
# sources that carry named splits (none of those read so far).
SPLIT_ROLES = ("train", "validation")
NAMED_SPLITS: tuple[str, ...] = ()
# What `protect.budget` is when a job protects suites and names none: HIP-1333 §3's example.
BUDGET_DEFAULTS = {"accuracy": 0.02, "ece": 0.03}


_one_of = v.check_one_of


def _unsupported(reason: str, field: str, supported: tuple[str, ...]) -> errors.DomainError:
    return errors.DomainError(
        f"Field {field} asks for something the base model does not run.",
        reason=reason,
        metadata={"field": field, "supported": ",".join(supported)},
        fields=[(field, "is not supported by the base model")],
    )


def dataset_scheme(uri: str) -> str:
    return uri.split(":", 1)[0]


def artifact_sha256(uri: str) -> str | None:
    return uri[len(ARTIFACT_URI) :] if uri.startswith(ARTIFACT_URI) else None


def origin(job: job_pb2.Job) -> str:
    """The sha256 the job's `from` names, or "" (`from` is a Python keyword)."""
    return str(getattr(job, "from"))


def check_shape(job: job_pb2.Job) -> None:
    """Everything that holds whatever the base: presence, formats, closed sets, bounds."""
    if not job.base_model:
        raise errors.ValidationError("base_model", "is required")
    v.check_identifier("base_model", job.base_model, BASE_NAME, "a model name")
    if origin(job) and not v.SHA256.match(origin(job)):
        raise errors.ValidationError("from", "must be a sha256")
    if origin(job) and not job.dataset.uri:
        # Without rows a job from an artifact would evaluate, merge or extend a basis
        # (HIP-1333 §3); no executor runs those, so `from` only continues a training.
        raise errors.ValidationError(
            "dataset.uri", "is required: a job with from trains on from its adapter"
        )
    if not job.dataset.uri:
        raise errors.ValidationError("dataset.uri", "is required")
    sha = artifact_sha256(job.dataset.uri)
    if (
        job.dataset.uri not in FIXTURES
        and not (sha is not None and v.SHA256.match(sha))
        and not remote.is_remote(job.dataset.uri)
    ):
        raise errors.ValidationError(
            "dataset.uri",
            "must name a built-in fixture, an uploaded artifact, an S3 object or a Hub file",
            metadata={"supported": ",".join((*FIXTURES, "artifact", *remote.SCHEMES))},
        )
    remote.check_uri(job.dataset)
    for tag in job.dataset.tags:
        v.check_identifier("dataset.tags", tag, v.NAME, "a tag name")
    if job.dataset.system_prompt.strip() and (
        problem := v.free_text_problem(job.dataset.system_prompt)
    ):
        raise errors.ValidationError("dataset.system_prompt", problem)
    if job.project:
        v.check_identifier(
            "project", job.project, v.PROJECT, "lower-case letters, digits and dashes"
        )
    if job.idempotency_key:
        v.check_identifier(
            "idempotency_key", job.idempotency_key, v.IDEMPOTENCY_KEY, "a safe identifier"
        )
    if job.requested_by:
        v.check_identifier("requested_by", job.requested_by, v.LABEL, "a non-secret label")
    if job.revision:
        v.check_identifier("revision", job.revision, v.NAME, "a revision name")

    obj = job.objective
    if obj.loss and obj.loss != "cross_entropy":
        _one_of("objective.loss", obj.loss, ("cross_entropy",))
    if obj.loss_mask:
        _one_of("objective.loss_mask", obj.loss_mask, LOSS_MASKS)
    for term in obj.terms:
        _one_of("objective.terms.kind", term.kind, TERMS)
        if not term.weight > 0:
            raise errors.ValidationError("objective.terms.weight", "must be above 0")
        if term.HasField("margin") and term.margin < 0:
            raise errors.ValidationError("objective.terms.margin", "must not be negative")

    ad = job.adaptation
    if ad.mode:
        _one_of("adaptation.mode", ad.mode, MODES)
    for name in ("rank", "alpha", "residual_rank"):
        if ad.HasField(name) and getattr(ad, name) < (0 if name == "residual_rank" else 1):
            raise errors.ValidationError(f"adaptation.{name}", "is out of range")
    for target in ad.targets:
        v.check_identifier("adaptation.targets", target, v.NAME, "a module name")
    if ad.basis and not v.SHA256.match(ad.basis):
        raise errors.ValidationError("adaptation.basis", "must be a sha256")
    if any(not v.SHA256.match(s) for s in ad.sources):
        raise errors.ValidationError("adaptation.sources", "must hold sha256 values")

    hp = job.hyperparameters
    if hp.HasField("num_train_epochs") and hp.HasField("max_steps"):
        raise errors.ValidationError(
            "hyperparameters.max_steps", "must not be sent with num_train_epochs"
        )
    if hp.HasField("max_steps") and not 1 <= hp.max_steps <= 100:
        raise errors.ValidationError(
            "hyperparameters.max_steps",
            "must be between 1 and 100",
            metadata={"min": "1", "max": "100"},
        )
    if hp.HasField("num_train_epochs") and not 1 <= hp.num_train_epochs <= 100:
        raise errors.ValidationError(
            "hyperparameters.num_train_epochs",
            "must be between 1 and 100",
            metadata={"min": "1", "max": "100"},
        )
    if hp.HasField("learning_rate") and not 0 < hp.learning_rate <= 1:
        raise errors.ValidationError(
            "hyperparameters.learning_rate", "must be above 0 and at most 1"
        )
    for name in (
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "max_seq_length",
        "save_steps",
    ):
        if hp.HasField(name) and getattr(hp, name) < 1:
            raise errors.ValidationError(f"hyperparameters.{name}", "must be at least 1")
    for name in ("warmup_steps", "early_stopping_patience", "seed"):
        if hp.HasField(name) and getattr(hp, name) < 0:
            raise errors.ValidationError(f"hyperparameters.{name}", "must not be negative")
    if hp.HasField("weight_decay") and not 0 <= hp.weight_decay <= 1:
        raise errors.ValidationError("hyperparameters.weight_decay", "must be between 0 and 1")
    if hp.HasField("base_load_precision"):
        _one_of("hyperparameters.base_load_precision", hp.base_load_precision, PRECISIONS)
    options.check_shape(hp)

    pr = job.protect
    for suite in pr.suites:
        v.check_identifier("protect.suites", suite, v.SUITE, "a suite name")
    if any(not v.SHA256.match(c) for c in pr.capabilities):
        raise errors.ValidationError("protect.capabilities", "must hold sha256 values")
    if pr.projection.HasField("strength") and not 0 <= pr.projection.strength <= 1:
        raise errors.ValidationError("protect.projection.strength", "must be between 0 and 1")
    for name in ("accuracy", "ece"):
        if pr.budget.HasField(name) and not 0 <= getattr(pr.budget, name) <= 1:
            raise errors.ValidationError(f"protect.budget.{name}", "must be between 0 and 1")
    for suite in job.evaluation.suites:
        v.check_identifier("evaluation.suites", suite, v.SUITE, "a suite name")
    for role, name in job.dataset.splits.items():
        _one_of("dataset.splits", role, SPLIT_ROLES)
        v.check_identifier("dataset.splits", name, v.NAME, "a split name")

    res = job.resources
    if len(set(res.machines)) != len(res.machines) or len(res.machines) > 16:
        raise errors.ValidationError("resources.machines", "must name at most 16 distinct machines")
    for machine in res.machines:
        v.check_identifier("resources.machines", machine, v.MACHINE, "a machine name")
    for device in res.devices:
        _one_of("resources.devices", device, DEVICES)
    for name in ("steps", "max_seconds", "budget"):
        if res.HasField(name) and getattr(res, name) < 1:
            raise errors.ValidationError(f"resources.{name}", "must be at least 1")
    if res.HasField("budget") and res.machines:
        raise errors.ValidationError(
            "resources.budget",
            "must not be sent with machines: the org's own machines cost nothing",
        )

    if job.output.kind:
        _one_of("output.kind", job.output.kind, OUTPUTS)
    if job.output.name:
        v.check_identifier(
            "output.name", job.output.name, v.NAME, "a name of letters, digits, dots, dashes"
        )

    rt = job.retention
    if rt.policy_class:
        _one_of("retention.policy_class", rt.policy_class, tuple(retention.CLASSES))
    if rt.HasField("ttl_seconds"):
        lo, hi, _ = retention.CLASSES[rt.policy_class or retention.DEFAULT_CLASS]
        if not lo <= rt.ttl_seconds <= hi:
            raise errors.ValidationError(
                "retention.ttl_seconds",
                "is outside its policy class's range",
                metadata={"min": str(lo), "max": str(hi)},
            )


def check_base(job: job_pb2.Job, catalog: Catalog) -> Base:
    base = catalog.get(job.base_model)
    if base is None:
        # An unapproved model is refused naming the bases (HIP-1333 §3's `unsupported_base`).
        raise errors.DomainError(
            UNKNOWN_BASE_MESSAGE,
            reason="UNSUPPORTED_BASE",
            metadata={"field": "base_model", "supported": ",".join(catalog.names)},
            fields=[("base_model", "is not an approved base model")],
        )
    if job.revision and job.revision != base.revision:
        raise errors.ValidationError(
            "revision", "is not a revision of the base model", metadata={"supported": base.revision}
        )
    return base


def check_agreement(job: job_pb2.Job) -> None:
    mode = job.adaptation.mode
    if origin(job) and mode not in ("", "lora"):
        raise errors.ValidationError(
            "from", "continues a LoRA adapter: adaptation.mode must be lora"
        )
    if job.output.kind == "lora" and mode and mode not in ("lora", "qlora"):
        raise errors.ValidationError("output.kind", "lora needs adaptation.mode lora or qlora")
    if mode not in ("lora", "qlora", "") and (
        job.adaptation.targets or job.adaptation.HasField("alpha")
    ):
        raise errors.ValidationError("adaptation.targets", "applies only to lora and qlora")


def check_support(job: job_pb2.Job, base: Base) -> None:
    if origin(job) and "lora" not in base.adaptations:
        raise _unsupported("UNSUPPORTED_ADAPTATION", "adaptation.mode", base.adaptations)
    if job.adaptation.mode and job.adaptation.mode not in base.adaptations:
        raise _unsupported("UNSUPPORTED_ADAPTATION", "adaptation.mode", base.adaptations)
    if any(t not in base.targets for t in job.adaptation.targets):
        raise _unsupported("UNSUPPORTED_ADAPTATION", "adaptation.targets", base.targets)
    if job.adaptation.basis or job.adaptation.sources:
        raise _unsupported("UNSUPPORTED_ADAPTATION", "adaptation.basis", ())
    if any(term.kind not in base.terms for term in job.objective.terms):
        raise _unsupported("UNSUPPORTED_OBJECTIVE", "objective.terms", base.terms)
    check_protect(job.protect, base)
    if job.output.kind and job.output.kind not in base.outputs:
        raise _unsupported("UNSUPPORTED_OUTPUT", "output.kind", base.outputs)
    if job.resources.devices and not set(job.resources.devices) & set(base.devices):
        raise _unsupported("UNSUPPORTED_DEVICE", "resources.devices", base.devices)
    if job.evaluation.suites and any(s not in base.suites for s in job.evaluation.suites):
        raise _unsupported("UNSUPPORTED_EVALUATION", "evaluation.suites", base.suites)
    scheme = dataset_scheme(job.dataset.uri)
    if scheme not in base.datasets or (
        scheme == "fixture" and job.dataset.uri not in base.fixtures
    ):
        raise errors.ValidationError(
            "dataset.uri",
            "names a source the base model cannot read",
            metadata={
                "supported": ",".join(
                    (*base.fixtures, *(d for d in base.datasets if d != "fixture"))
                )
            },
        )
    if job.dataset.splits and scheme not in NAMED_SPLITS:
        # 002: an upload's eval split follows from each example's identity alone.
        raise errors.ValidationError(
            "dataset.splits",
            "applies to a source with named splits; this source's eval split is drawn by "
            "each example's identity",
            metadata={"supported": ",".join(NAMED_SPLITS)},
        )
    if len(job.resources.machines) > base.machines:
        raise errors.ValidationError(
            "resources.machines",
            "names more machines than the base model trains across",
            metadata={"max": str(base.machines)},
        )
    if base.rows == "decision" and job.dataset.system_prompt.strip():
        raise errors.ValidationError("dataset.system_prompt", "applies only to chat rows")
    if job.objective.loss_mask and job.objective.loss_mask not in base.loss_masks:
        raise errors.ValidationError(
            "objective.loss_mask",
            "is not supported by the base model",
            metadata={"supported": ",".join(base.loss_masks)},
        )
    hp = job.hyperparameters
    if hp.HasField("base_load_precision") and hp.base_load_precision not in base.precisions:
        raise errors.ValidationError(
            "hyperparameters.base_load_precision",
            "is not supported by the base model",
            metadata={"supported": ",".join(base.precisions)},
        )
    options.check_support(job, base)
    for path, (lo, hi) in base.ranges.items():
        section, name = path.split(".")
        holder = getattr(job, section)
        if holder.HasField(name) and not lo <= getattr(holder, name) <= hi:
            raise errors.ValidationError(
                path,
                "is outside the base model's range",
                metadata={"min": f"{lo:g}", "max": f"{hi:g}"},
            )


def check_protect(pr: job_pb2.Protection, base: Base) -> None:
    """What the job protects, against what the base can protect: suites it already
    answers, by projection and distillation, within a budget."""
    asked = (
        pr.suites
        or pr.capabilities
        or pr.distillation
        or pr.HasField("projection")
        or pr.HasField("budget")
    )
    if asked and not base.protect:
        raise _unsupported("UNSUPPORTED_PROTECT", "protect", base.protect)
    if pr.capabilities:
        raise _unsupported("UNSUPPORTED_PROTECT", "protect.capabilities", base.protect)
    unknown = [suite for suite in pr.suites if suite not in base.protectable]
    if unknown:
        raise errors.ValidationError(
            "protect.suites",
            "names a suite the base does not answer",
            metadata={"supported": ",".join(base.protectable)},
        )
    if asked and not pr.suites:
        raise errors.ValidationError("protect.suites", "is required to protect anything")


def validate(
    job: job_pb2.Job, catalog: Catalog, inputs: Callable[[job_pb2.Job], None] | None = None
) -> Base:
    """Checks 1–4 of HIP-1333 §3; the first failure is the answer. `inputs` checks the
    artifacts the job names against it (the agreement of check 3) where a store is read."""
    check_shape(job)
    base = check_base(job, catalog)
    check_agreement(job)
    if inputs is not None:
        inputs(job)
    check_support(job, base)
    return base


def shape_sha256(job: job_pb2.Job) -> str:
    """The validated request's shape: the same key with another shape is a reuse."""
    request = job_pb2.Job()
    request.CopyFrom(job)
    request.ClearField("idempotency_key")
    return canonical_sha256(request)


def canonical_sha256(message: job_pb2.Job) -> str:
    doc = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def expand(job: job_pb2.Job, base: Base) -> job_pb2.Job:
    """The spec with every omitted setting filled from the base's profile."""
    out = job_pb2.Job()
    out.CopyFrom(job)
    out.project = job.project or DEFAULT_PROJECT
    out.revision = job.revision or base.revision
    out.dataset.tags[:] = list(dict.fromkeys(job.dataset.tags))
    out.dataset.system_prompt = job.dataset.system_prompt.strip()

    ad = out.adaptation
    if not ad.mode:
        ad.mode = "lora" if origin(job) else str(base.adaptation["mode"])
    if ad.mode == "auto":
        ad.mode = "full"
        ad.chose = f"full: {base.name} is small enough to train whole"
    if ad.mode in ("lora", "qlora"):
        if not ad.HasField("rank"):
            ad.rank = LORA_DEFAULTS["rank"]
        if not ad.HasField("alpha"):
            ad.alpha = LORA_DEFAULTS["alpha"]
        if not ad.targets:
            ad.targets[:] = list(base.default_targets)

    pr = out.protect
    if pr.suites:
        pr.suites[:] = list(dict.fromkeys(pr.suites))
        for field, bound in BUDGET_DEFAULTS.items():
            if not pr.budget.HasField(field):
                setattr(pr.budget, field, bound)
    if pr.HasField("projection") and not pr.projection.HasField("strength"):
        pr.projection.strength = 1.0
    out.evaluation.suites[:] = list(dict.fromkeys(out.evaluation.suites))

    out.objective.loss = out.objective.loss or "cross_entropy"
    out.objective.loss_mask = out.objective.loss_mask or base.loss_masks[0]

    hp = out.hyperparameters
    for name, value in base.defaults.items():
        if name == "num_train_epochs" and hp.HasField("max_steps"):
            continue
        if not hp.HasField(name):
            setattr(hp, name, value)

    if not out.output.kind:
        out.output.kind = base.default_output_kind(ad.mode)
    rt = out.retention
    rt.policy_class = rt.policy_class or retention.DEFAULT_CLASS
    if not rt.HasField("ttl_seconds"):
        rt.ttl_seconds = retention.CLASSES[rt.policy_class][2]
    return out
