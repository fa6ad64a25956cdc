"""What a call on a training client asks, checked before anything is stored: the REST
body read strictly into the request message (as a job's is), the create checked against
the base it names (HIP-1333 §3, §4), each operation's input against its bounds. What
depends on the loaded model (a token past the vocabulary) the engine checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message

from services.core import errors
from services.core import validation as v
from trainyard.client.v1 import client_pb2, client_service_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import LORA_DEFAULTS, Base, Catalog

R = TypeVar("R", bound=Message)
# The most token ids one list may hold, and the most datums one call may carry.
MAX_TOKENS = 8192
MAX_DATA = 64
MAX_WAIT_SECONDS = 120
DEFAULT_WAIT_SECONDS = 30
# Fields of a request message that a REST body may not carry: the path's and its own.
_NOT_IN_BODY = ("id", "body")
KINDS = ("forward_backward", "optim_step", "sample", "save_weights")


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


def check_seq(seq: int) -> None:
    if seq < 0:
        raise errors.ValidationError("seq", "must not be negative")


# -- create ---------------------------------------------------------------------------------


def engine_bases(catalog: Catalog) -> tuple[str, ...]:
    """The bases a client may load: the language models an engine trains LoRA on
    (HIP-1333 §4's engine row)."""
    bases = [catalog.get(name) for name in catalog.names]
    return tuple(b.name for b in bases if b is not None and b.serves_clients)


def adaptation_of(
    request: client_service_pb2.CreateTrainingClientRequest, catalog: Catalog
) -> tuple[Base, job_pb2.Adaptation, int]:
    """The base a create names, the adapter it trains (defaults filled) and its seed."""
    supported = engine_bases(catalog)
    base = catalog.get(request.base_model)
    if not request.base_model:
        raise errors.ValidationError("base_model", "is required")
    if base is None:
        raise errors.DomainError(
            "Field base_model is not an approved base model.",
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
    targets = list(source.targets) or list(LORA_DEFAULTS["targets"])  # type: ignore[call-overload]
    if any(t not in base.targets for t in targets):
        raise errors.DomainError(
            f"Field {prefix}.targets names a module the base does not have.",
            reason="UNSUPPORTED_ADAPTATION",
            metadata={"field": f"{prefix}.targets", "supported": ",".join(base.targets)},
            fields=[(f"{prefix}.targets", "is not supported by the base model")],
        )
    out.targets.extend(targets)
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
    if request.loss_fn not in ("", "cross_entropy"):
        raise errors.ValidationError(
            "loss_fn", "is not one of the accepted values", metadata={"supported": "cross_entropy"}
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
    return _json(request, ("data", "loss_fn"))


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
    return _json(request, ("prompt", "num_samples", "sampling_params"))


def save_weights_input(
    request: client_service_pb2.SaveTrainingClientWeightsRequest,
) -> dict[str, Any]:
    v.check_identifier("name", request.name, v.NAME, "letters, digits, dots, dashes or underscores")
    return _json(request, ("name",))


def _json(request: Message, fields: tuple[str, ...]) -> dict[str, Any]:
    whole = json_format.MessageToDict(request, preserving_proto_field_name=True)
    return {k: whole[k] for k in fields if k in whole}


OUTPUTS: Mapping[str, type[Message]] = {
    "forward_backward": client_pb2.ForwardBackwardOutput,
    "optim_step": client_pb2.OptimStepOutput,
    "sample": client_pb2.SampleOutput,
    "save_weights": client_pb2.SaveWeightsOutput,
}
