"""Loading a base for training: the built-in fixture, or a Hugging Face causal LM found on
local disk (the catalog lists what is present; nothing is downloaded)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from executor import fixture
from trainyard.training.catalog import FIXTURE_BASE, Catalog


@dataclasses.dataclass
class Loaded:
    model: torch.nn.Module
    codec: fixture.Codec
    # Writes a whole checkpoint of a trained model of this base.
    save: Callable[[Path, torch.nn.Module, dict[str, Any]], None]
    zero_stage: int
    # Token ids back to text, special tokens left out.
    decode: Callable[[list[int]], str]


def decode_bytes(ids: list[int]) -> str:
    """The fixture's ids as text: ids under 256 are bytes; pad, bos and eos are skipped."""
    return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


def load(name: str) -> Loaded:
    if name == FIXTURE_BASE:
        return Loaded(
            model=fixture.build(),
            codec=fixture.BYTES,
            save=lambda out, model, meta: fixture.write_model_files(out, model.state_dict(), meta),
            zero_stage=0,
            decode=decode_bytes,
        )
    base = Catalog.from_env(os.environ).get(name)
    if base is None:
        raise SystemExit("base_not_found")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base.path)
    model = AutoModelForCausalLM.from_pretrained(base.path, dtype=torch.float32)
    model.config.use_cache = False
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id
    codec = fixture.Codec(
        ids=lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]),
        bos=tokenizer.bos_token_id,
        eos=int(eos),
        pad=int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos),
    )

    def save(out: Path, trained: torch.nn.Module, meta: dict[str, Any]) -> None:
        out.mkdir(parents=True, exist_ok=True)
        trained.save_pretrained(str(out), safe_serialization=True)  # type: ignore[operator]
        tokenizer.save_pretrained(str(out))
        (out / "trainyard.json").write_text(json.dumps(meta, indent=2, sort_keys=True))

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=True))

    return Loaded(model=model, codec=codec, save=save, zero_stage=base.zero_stage, decode=decode)
