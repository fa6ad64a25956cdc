"""What a call on a training client asks, checked before anything is stored: the REST
body read strictly into the request message (as a job's is), the create checked against
the base it names (HIP-1333 §3, §4), each operation's input against its bounds. What
depends on the loaded model (a token past the vocabulary) the engine checks."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message

from services.core import errors
from services.core import validation as v
from trainyard.client.v1 import client_pb2, client_service_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import LORA_DEFAULTS, UNKNOWN_BASE_MESSAGE, Base, Catalog
from trainyard.training.client_calls import LOSS_FNS, MAX_TOPK, PPO_CLIP, RL_LOSS_FNS, SAVE_KINDS

R = TypeVar("R", bound=Message)
# The most token ids one list may hold, and the most datums one call may carry.
MAX_TOKENS = 8192
MAX_DATA = 64
MAX_WAIT_SECONDS = 120
# The longest deadline a call may ask for; and where its instant is kept in the input.
MAX_DEADLINE_SECONDS = 3600
DEADLINE = "deadline"
DEADLINE_MESSAGE = "The call did not start within its deadline_seconds."
DEFAULT_WAIT_SECONDS = 30
# Fields of a request message that a REST body may not carry: the path's and its own.
_NOT_IN_BODY = ("id", "body")


def read(request: R) -> R:
    """The request with its REST body (when it came over REST) read into it strictly."""
    if not request.HasField("body"):  # type: ignore[attr-defined]
        return request
    body = json_format.MessageToDict(request.body)  # type: ignore[attr-defined]
    for key in _NOT_IN_BODY:
        if key in body:
            raise errors.ValidationError(key, "is not a known field")
    parsed = v.parse_strict(body, type(request)(), scalars=MAX_TOKENS)
    names = parsed.DESCRIPTOR.fields_by_name
    if "id" in names:
        parsed.id = request.id  # type: ignore[attr-defined]
    # `wait` may come as a query parameter beside the body.
    if "wait" in names and not parsed.HasField("wait") and request.HasField("wait"):  # type: ignore[attr-defined]
        parsed.wait = request.wait  # type: ignore[attr-defined]
    return parsed


def wait_seconds(request: Message) -> float:
    if not request.HasField("wait"):  # type: ignore[attr-defined]
        return DEFAULT_WAIT_SECONDS
    wait = request.wait  # type: ignore[attr-defined]
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise errors.ValidationError("wait", "must be between 0 and 120 seconds")
    return float(wait)


def deadline_seconds(request: Message) -> dict[str, int]:
    """The call's `deadline_seconds`, as the part of its input that says so: a call
    that has not started within it fails `DEADLINE_EXCEEDED`."""
    if not request.HasField("deadline_seconds"):  # type: ignore[attr-defined]
        return {}
    seconds = int(request.deadline_seconds)  # type: ignore[attr-defined]
    if not 1 <= seconds <= MAX_DEADLINE_SECONDS:
        raise errors.ValidationError(
            "deadline_seconds",
            "must be between 1 and 3600 seconds",
            metadata={"min": "1", "max": str(MAX_DEADLINE_SECONDS)},
        )
    return {"deadline_seconds": seconds}


def with_deadline(given: Mapping[str, Any], now: dt.datetime) -> dict[str, Any]:
    """The input an engine is sent: the call's, with the instant its deadline falls
    (`deadline`, seconds since the epoch) when it asked for one. The engine refuses to
    start a call past it; the sweep fails one still queued."""
    seconds = given.get("deadline_seconds")
    if seconds is None:
        return dict(given)
    return {**given, DEADLINE: (now + dt.timedelta(seconds=int(seconds))).timestamp()}


def deadline_of(stored: Mapping[str, Any] | None) -> dt.datetime | None:
    """When a stored call's deadline falls, if it has one."""
    value = (stored or {}).get(DEADLINE)
    if not isinstance(value, int | float):
        return None
    return dt.datetime.fromtimestamp(float(value), dt.UTC)


def check_seq(seq: int) -> None:
    if seq < 0:
        raise errors.ValidationError("seq", "must not be negative")


# -- create ---------------------------------------------------------------------------------


def engine_bases(catalog: Catalog) -> tuple[str, ...]:
    """The bases a client may load: the language models an engine trains LoRA on
    (HIP-1333 §4's engine row)."""
    bases = [catalog.get(name) for name in catalog.names]
    return tuple(b.name for b in bases if b is not None and b.serves_clients)


def origin_of(request: client_service_pb2.CreateTrainingClientRequest) -> str:
    """The sha256 a create's `from` names, or "" (`from` is a Python keyword); checked for
    its form, and `with_optimizer` only beside it."""
    origin = str(getattr(request, "from"))
    if origin and not v.SHA256.match(origin):
        raise errors.ValidationError("from", "must be a sha256")
    if request.with_optimizer and not origin:
        raise errors.ValidationError("with_optimizer", "needs from")
    return origin


def adaptation_of(
    request: client_service_pb2.CreateTrainingClientRequest,
    catalog: Catalog,
    adapter: Any = None,
) -> tuple[Base, job_pb2.Adaptation, int]:
    """The base a create names, the adapter it trains (defaults filled) and its seed. With
    `adapter` (what `from` names: its base, rank, alpha and targets) the create must agree
    with it, and what it leaves out is the adapter's."""
    supported = engine_bases(catalog)
    base = catalog.get(request.base_model)
    if not request.base_model:
        raise errors.ValidationError("base_model", "is required")
    if base is None:
        raise errors.DomainError(
            UNKNOWN_BASE_MESSAGE,
            reason="UNSUPPORTED_BASE",
            metadata={"field": "base_model", "supported": ",".join(supported)},
            fields=[("base_model", "is not an approved base model")],
        )
    if base.name not in supported:
        # A job base (the decision base) is not a client's: HIP-1333 §4.
        raise errors.DomainError(
            "Field base_model names a base that trains as a job, not as a client.",
            reason="UNSUPPORTED_BASE",
            metadata={"field": "base_model", "supported": ",".join(supported)},
            fields=[("base_model", "trains as a job, not as a client")],
        )
    ad, lora = request.adaptation, request.lora_config
    if request.HasField("adaptation") and request.HasField("lora_config"):
        raise errors.ValidationError("lora_config", "is the same as adaptation: send one")
    if ad.mode not in ("", "lora"):
        raise errors.DomainError(
            "Field adaptation.mode asks for something a client does not run.",
            reason="UNSUPPORTED_ADAPTATION",
            metadata={"field": "adaptation.mode", "supported": "lora"},
            fields=[("adaptation.mode", "is not supported by a client")],
        )
    if ad.basis or ad.sources or ad.HasField("residual_rank"):
        raise errors.DomainError(
            "Field adaptation.basis asks for something a client does not run.",
            reason="UNSUPPORTED_ADAPTATION",
            metadata={"field": "adaptation.basis"},
            fields=[("adaptation.basis", "is not supported by a client")],
        )
    source, prefix = (
        (lora, "lora_config") if request.HasField("lora_config") else (ad, "adaptation")
    )
    out = job_pb2.Adaptation(mode="lora")
    for name, (lo, hi) in (("rank", (1, 256)), ("alpha", (1, 1024))):
        value = getattr(source, name) if source.HasField(name) else LORA_DEFAULTS[name]
        assert isinstance(value, int)
        if not lo <= value <= hi:
            raise errors.ValidationError(
                f"{prefix}.{name}",
                "is outside the range",
                metadata={"min": str(lo), "max": str(hi)},
            )
        setattr(out, name, value)
    targets = list(source.targets) or list(base.default_targets)
    if any(t not in base.targets for t in targets):
        raise errors.DomainError(
            f"Field {prefix}.targets names a module the base does not have.",
            reason="UNSUPPORTED_ADAPTATION",
            metadata={"field": f"{prefix}.targets", "supported": ",".join(base.targets)},
            fields=[(f"{prefix}.targets", "is not supported by the base model")],
        )
    out.targets.extend(targets)
    if adapter is not None:
        mismatched = (
            "base_model"
            if adapter.base != base.name
            else f"{prefix}.rank"
            if source.HasField("rank") and source.rank != adapter.rank
            else f"{prefix}.alpha"
            if source.HasField("alpha") and source.alpha != adapter.alpha
            else f"{prefix}.targets"
            if source.targets and tuple(sorted(source.targets)) != adapter.targets
            else ""
        )
        if mismatched:
            raise errors.DomainError(
                f"Field {mismatched} does not match the adapter the client starts from.",
                reason="INCOMPATIBLE_ADAPTERS",
                metadata={"field": mismatched},
                fields=[(mismatched, "does not match the adapter named by from")],
            )
        out.rank, out.alpha = adapter.rank, adapter.alpha
        out.targets[:] = list(adapter.targets)
    seed = lora.seed if lora.HasField("seed") else 0
    if not 0 <= seed < 2**31:
        raise errors.ValidationError("lora_config.seed", "is outside the range")
    # An engine base protects nothing (§4: protect `none`): asking is refused by name.
    if request.HasField("protect") and request.protect.ListFields():
        raise errors.DomainError(
            "Field protect asks for something a client does not run.",
            reason="UNSUPPORTED_PROTECT",
            metadata={"field": "protect", "supported": ""},
            fields=[("protect", "is not supported by a client")],
        )
    return base, out, seed


# -- operations -----------------------------------------------------------------------------


def _finite(field: str, value: float, lo: float, hi: float, *, open_lo: bool = False) -> None:
    if not math.isfinite(value) or value < lo or value > hi or (open_lo and value == lo):
        raise errors.ValidationError(field, "is outside the range")


def _model_input(field: str, model_input: client_pb2.ModelInput) -> None:
    if bool(model_input.tokens) == bool(model_input.text):
        raise errors.ValidationError(field, "must hold tokens or text, one of them")
    if any(t < 0 for t in model_input.tokens):
        raise errors.ValidationError(f"{field}.tokens", "must be token ids")
    if len(model_input.text) > 65536:
        raise errors.ValidationError(f"{field}.text", "is too long")


def forward_backward_input(request: client_service_pb2.RunForwardBackwardRequest) -> dict[str, Any]:
    if request.loss_fn not in LOSS_FNS:
        raise errors.ValidationError(
            "loss_fn",
            "is not one of the accepted values",
            metadata={"supported": ",".join(LOSS_FNS[1:])},
        )
    rl = request.loss_fn in RL_LOSS_FNS
    config = dict(request.loss_fn_config)
    if any(k not in (PPO_CLIP if request.loss_fn == "ppo" else ()) for k in config):
        raise errors.ValidationError("loss_fn_config", "names a setting the loss does not have")
    low, high = (config.get(name, default) for name, default in PPO_CLIP.items())
    if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= 1 <= high):
        raise errors.ValidationError(
            "loss_fn_config", "must bound the ratio: clip_low_threshold <= 1 <= clip_high"
        )
    if not 1 <= len(request.data) <= MAX_DATA:
        raise errors.ValidationError("data", "must hold 1 to 64 datums")
    for i, datum in enumerate(request.data):
        where = f"data[{i}]"
        _model_input(f"{where}.model_input", datum.model_input)
        targets, weights = datum.loss_fn_inputs.target_tokens, datum.loss_fn_inputs.weights
        if datum.model_input.tokens and len(targets) != len(datum.model_input.tokens):
            raise errors.ValidationError(
                f"{where}.loss_fn_inputs.target_tokens", "must hold one token per input token"
            )
        if datum.model_input.text and targets:
            raise errors.ValidationError(
                f"{where}.loss_fn_inputs.target_tokens", "applies to tokens, not text"
            )
        if any(t < 0 for t in targets):
            raise errors.ValidationError(
                f"{where}.loss_fn_inputs.target_tokens", "must be token ids"
            )
        if weights and (
            len(weights) != len(targets) or any(not math.isfinite(w) or w < 0 for w in weights)
        ):
            raise errors.ValidationError(
                f"{where}.loss_fn_inputs.weights", "must hold one weight of at least 0 per target"
            )
        _rl_inputs(where, datum, rl)
    return _json(request, ("data", "loss_fn", "forward_only", "loss_fn_config"))


def _rl_inputs(where: str, datum: client_pb2.Datum, rl: bool) -> None:
    """The sampling logprobs and advantages: one of each per target for the RL losses,
    none for `cross_entropy`."""
    inputs = datum.loss_fn_inputs
    for name in ("logprobs", "advantages"):
        values = getattr(inputs, name)
        field = f"{where}.loss_fn_inputs.{name}"
        if not rl:
            if values:
                raise errors.ValidationError(field, "applies to importance_sampling and ppo")
            continue
        if not inputs.target_tokens:
            raise errors.ValidationError(
                f"{where}.loss_fn_inputs.target_tokens", "is required by the loss"
            )
        if len(values) != len(inputs.target_tokens) or not all(map(math.isfinite, values)):
            raise errors.ValidationError(field, "must hold one finite number per target")
        if name == "logprobs" and any(x > 0 for x in values):
            raise errors.ValidationError(field, "must not be above 0")


def optim_step_input(request: client_service_pb2.RunOptimStepRequest) -> dict[str, Any]:
    adam = request.adam_params
    if adam.HasField("learning_rate"):
        _finite("adam_params.learning_rate", adam.learning_rate, 0.0, 1.0, open_lo=True)
    for name in ("beta1", "beta2"):
        if adam.HasField(name):
            _finite(f"adam_params.{name}", getattr(adam, name), 0.0, 0.999999)
    if adam.HasField("eps"):
        _finite("adam_params.eps", adam.eps, 0.0, 1.0, open_lo=True)
    return _json(request, ("adam_params",))


def sample_input(request: client_service_pb2.SampleTrainingClientRequest) -> dict[str, Any]:
    _model_input("prompt", request.prompt)
    if not 0 <= request.num_samples <= 16:
        raise errors.ValidationError("num_samples", "must be between 1 and 16")
    sp = request.sampling_params
    if not 0 <= sp.max_tokens <= 1024:
        raise errors.ValidationError("sampling_params.max_tokens", "must be between 1 and 1024")
    if sp.HasField("temperature"):
        _finite("sampling_params.temperature", sp.temperature, 0.0, 5.0)
    if sp.HasField("top_p"):
        _finite("sampling_params.top_p", sp.top_p, 0.0, 1.0, open_lo=True)
    if sp.top_k < 0:
        raise errors.ValidationError("sampling_params.top_k", "must not be negative")
    if len(sp.stop) > 4 or any(not 1 <= len(s) <= 64 for s in sp.stop):
        raise errors.ValidationError("sampling_params.stop", "must hold at most 4 short strings")
    if len(sp.stop_tokens) > 16 or any(t < 0 for t in sp.stop_tokens):
        raise errors.ValidationError(
            "sampling_params.stop_tokens", "must hold at most 16 token ids"
        )
    if not 0 <= request.topk_prompt_logprobs <= MAX_TOPK:
        raise errors.ValidationError(
            "topk_prompt_logprobs",
            "is outside the range",
            metadata={"min": "0", "max": str(MAX_TOPK)},
        )
    return _json(
        request,
        ("prompt", "num_samples", "sampling_params", "prompt_logprobs", "topk_prompt_logprobs"),
    )


def save_weights_input(
    request: client_service_pb2.SaveTrainingClientWeightsRequest,
) -> dict[str, Any]:
    v.check_identifier("name", request.name, v.NAME, "letters, digits, dots, dashes or underscores")
    if request.kind not in SAVE_KINDS:
        raise errors.ValidationError(
            "kind", "is not one of the accepted values", metadata={"supported": "lora,state"}
        )
    return _json(request, ("name", "kind"))


def _json(request: Message, fields: tuple[str, ...]) -> dict[str, Any]:
    whole = json_format.MessageToDict(request, preserving_proto_field_name=True)
    return {k: whole[k] for k in fields if k in whole}


OUTPUTS: Mapping[str, type[Message]] = {
    "forward_backward": client_pb2.ForwardBackwardOutput,
    "optim_step": client_pb2.OptimStepOutput,
    "sample": client_pb2.SampleOutput,
    "save_weights": client_pb2.SaveWeightsOutput,
}
