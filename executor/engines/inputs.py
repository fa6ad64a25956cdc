"""An engine operation's input, checked: each bound broken is an `Invalid` naming the
field's path with a fixed phrase, never the value."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_DATA = 64
MAX_SAMPLES = 16
MAX_NEW_TOKENS = 1024
DEFAULT_NEW_TOKENS = 16
MAX_TEMPERATURE = 5.0
MAX_STOPS = 4
MAX_STOP_TOKENS = 16
ADAM_DEFAULTS = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12}


class Invalid(Exception):
    """An operation's input breaks a bound: the field's path and a fixed phrase."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def snake(value: Any) -> Any:
    """Proto JSON may name fields in lowerCamelCase; the engine reads snake_case."""
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def object_of(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(field, "must be an object")
    return value


def int_of(value: Any, field: str) -> int:
    # Proto JSON writes int64 values as strings.
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise Invalid(field, "must be an integer")
    return int(value)


def float_of(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        # Proto JSON writes NaN and the infinities as strings: never valid here.
        raise Invalid(field, "must be a finite number")
    if not math.isfinite(value):
        raise Invalid(field, "must be a finite number")
    return float(value)


def ints_of(value: Any, field: str) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(field, "must be a list of integers")
    return [int_of(v, field) for v in value]


def sampling(body: dict[str, Any]) -> dict[str, Any]:
    """A sample's settings, checked, with the defaults filled in."""
    params = object_of(body.get("sampling_params"), "sampling_params")
    num = int_of(body.get("num_samples") or 1, "num_samples")
    if not 1 <= num <= MAX_SAMPLES:
        raise Invalid("num_samples", f"must be 1 to {MAX_SAMPLES}")
    max_tokens = int_of(params.get("max_tokens") or 0, "sampling_params.max_tokens")
    if not 0 <= max_tokens <= MAX_NEW_TOKENS:
        raise Invalid("sampling_params.max_tokens", f"must be 0 to {MAX_NEW_TOKENS}")
    raw = params.get("temperature")
    temperature = 1.0 if raw is None else float_of(raw, "sampling_params.temperature")
    if not 0 <= temperature <= MAX_TEMPERATURE:
        raise Invalid("sampling_params.temperature", f"must be 0 to {MAX_TEMPERATURE:g}")
    raw = params.get("top_p")
    top_p = 1.0 if raw is None else float_of(raw, "sampling_params.top_p")
    if not 0 < top_p <= 1:
        raise Invalid("sampling_params.top_p", "must be above 0 and at most 1")
    top_k = int_of(params.get("top_k") or 0, "sampling_params.top_k")
    if top_k < 0:
        raise Invalid("sampling_params.top_k", "must not be negative")
    stop = params.get("stop") or []
    if (
        not isinstance(stop, list)
        or len(stop) > MAX_STOPS
        or any(not isinstance(s, str) or not s for s in stop)
    ):
        raise Invalid("sampling_params.stop", f"must hold at most {MAX_STOPS} non-empty strings")
    stop_tokens = ints_of(params.get("stop_tokens"), "sampling_params.stop_tokens")
    if len(stop_tokens) > MAX_STOP_TOKENS:
        raise Invalid("sampling_params.stop_tokens", f"must hold at most {MAX_STOP_TOKENS} tokens")
    seed = params.get("seed")
    return {
        "stop_tokens": frozenset(stop_tokens),
        "num": num,
        "max_tokens": max_tokens or DEFAULT_NEW_TOKENS,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "stop": stop,
        "seed": None if seed is None else int_of(seed, "sampling_params.seed"),
    }


def adam(body: dict[str, Any]) -> dict[str, float]:
    """An optim_step's Adam settings, checked, with the defaults filled in."""
    given = object_of(body.get("adam_params"), "adam_params")
    hp = {
        k: float_of(given[k], f"adam_params.{k}") if given.get(k) is not None else v
        for k, v in ADAM_DEFAULTS.items()
    }
    if not 0 < hp["learning_rate"] <= 1:
        raise Invalid("adam_params.learning_rate", "must be above 0 and at most 1")
    for beta in ("beta1", "beta2"):
        if not 0 <= hp[beta] < 1:
            raise Invalid(f"adam_params.{beta}", "must be at least 0 and below 1")
    if not hp["eps"] > 0:
        raise Invalid("adam_params.eps", "must be above 0")
    return hp
