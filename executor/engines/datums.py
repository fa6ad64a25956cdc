"""A forward_backward's input, checked against the base before any gradient moves: its loss,
the loss's settings, and each datum's tokens, targets, weights or sampling logprobs and
advantages. Each bound broken is an `inputs.Invalid`, never quoting the value."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from executor.engines import inputs
from trainyard.training.client_calls import LOSS_FNS, PPO_CLIP, RL_LOSS_FNS

if TYPE_CHECKING:
    from executor.models.fixture import Codec


# A datum as the losses read it: tokens, targets, and two columns of numbers (the weights
# and nothing, or the sampling logprobs and the advantages), one per input token.
Parsed = tuple[list[int], list[int], list[float], list[float]]


@dataclasses.dataclass(frozen=True)
class Vocab:
    """What a datum's tokens are checked against: the base's codec, its vocabulary's size
    and the most positions it reads."""

    codec: Codec
    size: int
    max_positions: int


@dataclasses.dataclass(frozen=True)
class Batch:
    """A forward_backward's input, checked."""

    loss_fn: str
    forward_only: bool
    config: dict[str, float]
    data: list[Parsed]

    @property
    def rl(self) -> bool:
        return self.loss_fn in RL_LOSS_FNS


def batch(body: dict[str, Any], vocab: Vocab) -> Batch:
    """The loss, its settings and every datum, each checked in the order a caller reads
    them, so the first bound broken is the one answered."""
    loss_fn = body.get("loss_fn") or ""
    if loss_fn not in LOSS_FNS:
        raise inputs.Invalid("loss_fn", "must be cross_entropy, importance_sampling or ppo")
    forward_only = body.get("forward_only") or False
    if not isinstance(forward_only, bool):
        raise inputs.Invalid("forward_only", "must be true or false")
    config = loss_config(loss_fn, body)
    data = body.get("data")
    if not isinstance(data, list) or not 1 <= len(data) <= inputs.MAX_DATA:
        raise inputs.Invalid("data", f"must hold 1 to {inputs.MAX_DATA} datums")
    parsed: list[Parsed] = []
    for i, d in enumerate(data):
        if loss_fn in RL_LOSS_FNS:
            parsed.append(rl_datum(d, f"data[{i}]", vocab))
        else:
            ids, t, w = datum(d, f"data[{i}]", vocab)
            parsed.append((ids, t, w, []))
    return Batch(loss_fn, forward_only, config, parsed)


def loss_config(loss_fn: str, body: dict[str, Any]) -> dict[str, float]:
    """The loss's settings: `ppo`'s clip thresholds, the given ones else Tinker's."""
    given = inputs.object_of(body.get("loss_fn_config"), "loss_fn_config")
    allowed = PPO_CLIP if loss_fn == "ppo" else {}
    if any(k not in allowed for k in given):
        raise inputs.Invalid("loss_fn_config", "names a setting the loss does not have")
    config = {
        k: inputs.float_of(given[k], f"loss_fn_config.{k}") if k in given else v
        for k, v in allowed.items()
    }
    if config and not 0 <= config["clip_low_threshold"] <= 1 <= config["clip_high_threshold"]:
        raise inputs.Invalid(
            "loss_fn_config", "must bound the ratio: clip_low_threshold <= 1 <= clip_high"
        )
    return config


def tokens(value: Any, field: str, vocab: Vocab, *, least: int = 1) -> list[int]:
    ids = inputs.ints_of(value, field)
    if not least <= len(ids) <= vocab.max_positions:
        raise inputs.Invalid(field, f"must hold {least} to {vocab.max_positions} tokens")
    if any(not 0 <= i < vocab.size for i in ids):
        raise inputs.Invalid(field, "must hold token ids of the base's vocabulary")
    return ids


def input_ids(value: Any, field: str, vocab: Vocab) -> tuple[list[int], bool]:
    """A ModelInput's ids, and whether they came from text (encoded after the base's
    bos, as its training saw text)."""
    model_input = inputs.object_of(value, field)
    given, text = model_input.get("tokens"), model_input.get("text")
    if bool(given) == bool(text):
        raise inputs.Invalid(field, "must hold exactly one of tokens and text")
    if given:
        return tokens(given, f"{field}.tokens", vocab), False
    if not isinstance(text, str):
        raise inputs.Invalid(f"{field}.text", "must be text")
    codec = vocab.codec
    ids = ([codec.bos] if codec.bos is not None else []) + codec.ids(text)
    return tokens(ids, f"{field}.text", vocab), True


def floats(raw: Any, where: str, n: int) -> list[float]:
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise inputs.Invalid(where, "must be a list of numbers")
    values = [inputs.float_of(x, where) for x in raw]
    if len(values) != n:
        raise inputs.Invalid(where, "must hold one number per input token")
    return values


def _targets(raw: Any, where: str, n: int, vocab: Vocab) -> list[int]:
    targets = inputs.ints_of(raw, where)
    if len(targets) != n:
        raise inputs.Invalid(where, "must hold one target per input token")
    if any(not 0 <= t < vocab.size for t in targets):
        raise inputs.Invalid(where, "must hold token ids of the base's vocabulary")
    return targets


def rl_datum(value: Any, field: str, vocab: Vocab) -> Parsed:
    """An `importance_sampling` or `ppo` datum: tokens, targets, the sampling
    logprobs and the advantages, one of each per input token."""
    d = inputs.object_of(value, field)
    ids, _ = input_ids(d.get("model_input"), f"{field}.model_input", vocab)
    loss_inputs = inputs.object_of(d.get("loss_fn_inputs"), f"{field}.loss_fn_inputs")
    where = f"{field}.loss_fn_inputs.target_tokens"
    targets = _targets(loss_inputs.get("target_tokens"), where, len(ids), vocab)
    where = f"{field}.loss_fn_inputs.logprobs"
    sampled = floats(loss_inputs.get("logprobs"), where, len(ids))
    if any(x > 0 for x in sampled):
        raise inputs.Invalid(where, "must not be above 0")
    advantages = floats(
        loss_inputs.get("advantages"), f"{field}.loss_fn_inputs.advantages", len(ids)
    )
    return ids, targets, sampled, advantages


def datum(value: Any, field: str, vocab: Vocab) -> tuple[list[int], list[int], list[float]]:
    """A `cross_entropy` datum: tokens, targets and weights, one of each per input token;
    text alone predicts each next token."""
    d = inputs.object_of(value, field)
    ids, from_text = input_ids(d.get("model_input"), f"{field}.model_input", vocab)
    loss_inputs = inputs.object_of(d.get("loss_fn_inputs"), f"{field}.loss_fn_inputs")
    raw_targets = loss_inputs.get("target_tokens")
    raw_weights = loss_inputs.get("weights")
    if from_text and not raw_targets and not raw_weights:
        # Text alone: each position predicts the next token.
        if len(ids) < 2:
            raise inputs.Invalid(f"{field}.model_input.text", "must encode to 2 tokens or more")
        return ids[:-1], ids[1:], [1.0] * (len(ids) - 1)
    where = f"{field}.loss_fn_inputs.target_tokens"
    targets = _targets(raw_targets, where, len(ids), vocab)
    where = f"{field}.loss_fn_inputs.weights"
    if raw_weights is None:
        raw_weights = []
    if not isinstance(raw_weights, list):
        raise inputs.Invalid(where, "must be a list of numbers")
    weights = [inputs.float_of(w, where) for w in raw_weights] or [1.0] * len(ids)
    if len(weights) != len(ids):
        raise inputs.Invalid(where, "must be empty or hold one weight per input token")
    if any(w < 0 for w in weights):
        raise inputs.Invalid(where, "must not be negative")
    return ids, targets, weights
