"""What a local base's family says about training it: the linear layers a LoRA adapter may
wrap (read from its weights) and the ones it wraps by default (from its `model_type`).

peft's `TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING` is the source of truth for the
defaults; the services do not install peft, so the families Trainyard is tested on are
copied here, and tests/unit/test_families.py checks that the copy agrees with peft's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# Each family's default LoRA targets, by `model_type`: peft's mapping where it has an entry;
# Phi-3 (no entry in peft 0.21) fuses its attention into one `qkv_proj`.
LORA_TARGETS: Mapping[str, tuple[str, ...]] = {
    "llama": ("q_proj", "v_proj"),
    "mistral": ("q_proj", "v_proj"),
    "mixtral": ("q_proj", "v_proj"),
    "qwen2": ("q_proj", "v_proj"),
    "qwen3": ("q_proj", "v_proj"),
    "gemma": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"),
    "gemma3_text": ("q_proj", "v_proj"),
    "phi": ("q_proj", "v_proj", "fc1", "fc2"),
    "phi3": ("qkv_proj",),
}
# For a family the table lacks: the first of these its layers have, as peft's entries for
# the other families read (separate query and value projections, else a fused one).
FALLBACK_TARGETS: tuple[tuple[str, ...], ...] = (
    ("q_proj", "v_proj"),
    ("qkv_proj",),
    ("query_key_value",),
    ("c_attn",),
    ("Wqkv",),
)
# A tensor inside a numbered decoder layer (`model.layers.3.mlp.up_proj.weight`).
_LAYER_WEIGHT = re.compile(r"\.\d+\.(?:.+\.)?([A-Za-z_][A-Za-z0-9_]*)\.weight$")
_NOT_LINEAR = ("norm", "embed", "lm_head", "wte", "wpe")


def targetable(tensors: Mapping[str, Mapping[str, object]]) -> tuple[str, ...]:
    """The names of the linear layers inside the decoder layers (2-D weights, not norms or
    embeddings), in the order they first appear: what `adaptation.targets` may name."""
    names: dict[str, None] = {}
    for key in sorted(tensors, key=_natural):
        shape = tensors[key].get("shape")
        found = _LAYER_WEIGHT.search(key)
        if not found or not isinstance(shape, list) or len(shape) != 2:
            continue
        name = found.group(1)
        if not any(part in name.lower() for part in _NOT_LINEAR):
            names[name] = None
    return tuple(names)


def default_targets(model_type: str, modules: Iterable[str]) -> tuple[str, ...]:
    """The modules a LoRA job or client wraps when it names none: the family's own when
    the base has them all, else the fallback's first that it has, else every one."""
    have = tuple(modules)
    for choice in (LORA_TARGETS.get(model_type, ()), *FALLBACK_TARGETS):
        if choice and all(m in have for m in choice):
            return choice
    return have


def _natural(key: str) -> tuple[object, ...]:
    """`layers.2` before `layers.10`, so the order reads as the model's."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key))
