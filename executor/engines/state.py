"""An engine's saved weights: what save_weights writes (the adapter, its config, trainyard.json
and, for a `state`, Adam's step and moments) and how an engine starts from them again."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from executor.engines import inputs
from trainyard.training.client_calls import OPTIMIZER_FILE, SAVE_KINDS

ADAPTER_FILE = "adapter_model.safetensors"
CONFIG_FILE = "adapter_config.json"
META_FILE = "trainyard.json"
# What Adam keeps per weight, saved by the weight's name.
MOMENTS = ("step", "exp_avg", "exp_avg_sq")

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

Named = Sequence[tuple[str, torch.nn.Parameter]]


class Unreadable(Exception):
    """A saved adapter or state that does not fit the engine: a file missing or unreadable,
    or a weight missing, extra or of another shape."""


def save_request(body: dict[str, Any]) -> tuple[str, str]:
    """A save's name and kind (`lora` unless `state`), checked."""
    name = body.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise inputs.Invalid("name", "must be 1 to 64 letters, digits, dots, dashes or underscores")
    kind = body.get("kind") or ""
    if kind not in SAVE_KINDS:
        raise inputs.Invalid("kind", "must be lora or state")
    return name, kind or "lora"


def save(
    model: Any,
    out_dir: Path,
    meta: dict[str, Any],
    optimizer: torch.optim.Optimizer | None,
    named: Named,
) -> None:
    """Write the adapter (safetensors and its config), `optimizer`'s state when given, and
    `meta` as trainyard.json to `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    if optimizer is not None:
        save_optimizer(optimizer, named, out_dir / OPTIMIZER_FILE)
    (out_dir / "README.md").unlink(missing_ok=True)
    # The targets are a set inside peft: write them in order, so the bytes repeat.
    config_path = out_dir / CONFIG_FILE
    config = json.loads(config_path.read_text())
    if isinstance(config.get("target_modules"), list):
        config["target_modules"] = sorted(config["target_modules"])
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))


def save_optimizer(optimizer: torch.optim.Optimizer, named: Named, path: Path) -> None:
    """Adam's state per LoRA weight, by the weight's name: its step and moments."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    for name, param in named:
        state = optimizer.state.get(param) or {}
        for key in MOMENTS:
            if key in state:
                value = state[key]
                value = value if isinstance(value, torch.Tensor) else torch.tensor(value)
                tensors[f"{name}/{key}"] = value.detach().cpu().contiguous()
    save_file(tensors, str(path), metadata={"format": "pt"})


def load_adapter(model: Any, directory: Path) -> None:
    """Load a saved adapter's weights into `model`: every LoRA weight must come from it,
    or `Unreadable` rather than half-load."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors.torch import load_file

    try:
        weights = load_file(str(directory / ADAPTER_FILE))
    except (OSError, ValueError, RuntimeError):
        raise Unreadable from None
    expected = get_peft_model_state_dict(model)
    if set(weights) != set(expected) or any(
        weights[k].shape != expected[k].shape for k in expected
    ):
        raise Unreadable
    set_peft_model_state_dict(model, weights)


def load_optimizer(
    named: Named, directory: Path, device: torch.device
) -> tuple[torch.optim.AdamW, int]:
    """An AdamW over the `named` weights with a saved state's step and moments, and the
    step the state was saved at; `Unreadable` if any weight's are missing."""
    from safetensors.torch import load_file

    try:
        saved = load_file(str(directory / OPTIMIZER_FILE))
        meta = json.loads((directory / META_FILE).read_text())
    except (OSError, ValueError, RuntimeError):
        raise Unreadable from None
    optimizer = torch.optim.AdamW([p for _, p in named], weight_decay=0.0)
    for name, param in named:
        keys = [f"{name}/{k}" for k in MOMENTS]
        if any(k not in saved for k in keys):
            raise Unreadable
        step, avg, avg_sq = (saved[k] for k in keys)
        optimizer.state[param] = {
            "step": step.clone(),
            "exp_avg": avg.to(device, param.dtype),
            "exp_avg_sq": avg_sq.to(device, param.dtype),
        }
    return optimizer, int(meta.get("step") or 0)
