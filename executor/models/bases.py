"""Loading a base for training: the built-in fixture, or a Hugging Face causal LM found on
local disk (the catalog lists what is present; nothing is downloaded). And writing a
built-in base to disk (`export`), so outputs trained on it can be used outside Trainyard."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from executor.models import chat, fixture
from trainyard.training.catalog import DECIDER, DECIDER_BASE, FIXTURE, FIXTURE_BASE, Catalog


@dataclasses.dataclass
class Loaded:
    model: torch.nn.Module
    codec: fixture.Codec
    # Writes a whole checkpoint of a trained model of this base.
    save: Callable[[Path, torch.nn.Module, dict[str, Any]], None]
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
        chat=chat.encoder(tokenizer),
    )

    def save(out: Path, trained: torch.nn.Module, meta: dict[str, Any]) -> None:
        """The base's own model directory, trained; its tokenizer keeps its chat template
        (the trainer encoded with it), or gains the fixture's, which the trainer encodes
        with when it has none, so `apply_chat_template` gives the ids it trained on."""
        out.mkdir(parents=True, exist_ok=True)
        trained.save_pretrained(str(out), safe_serialization=True)  # type: ignore[operator]
        if tokenizer.chat_template is None:
            tokenizer.chat_template = fixture.CHAT_TEMPLATE
        tokenizer.save_pretrained(str(out), save_jinja_files=False)
        (out / "trainyard.json").write_text(json.dumps(meta, indent=2, sort_keys=True))

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=True))

    return Loaded(model=model, codec=codec, save=save, decode=decode)


# The dtypes a job's `base_load_precision` names, as the catalog's bases accept them.
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def at_precision(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """The base held in the dtype the job's `base_load_precision` names; a name the
    catalog never accepts fails the run rather than train in another dtype."""
    dtype = PRECISIONS.get(precision)
    if dtype is None:
        raise SystemExit("unsupported_base_load_precision")
    return model.to(dtype)


class CannotExport(ValueError):
    """Why `export` wrote nothing: the base is not built in, or the directory holds files."""


def export(name: str, out: Path) -> str:
    """Write the built-in base `name` to `out` and return its `base_sha256`, the digest a
    job's result names, so a user can check an adapter or a capability against the base
    they hold. The fixture is a Hugging Face model directory; the decider, not a
    transformers model, is its `model.safetensors` and `decider.json`. Either way the
    sha256 of `model.safetensors` is the `base_sha256`."""
    if name not in (FIXTURE_BASE, DECIDER_BASE):
        local = Catalog.from_env(os.environ).get(name)
        if local is not None:
            raise CannotExport(
                f"{name} is a Hugging Face base on local disk ({local.path}): it is a model "
                "directory already; there is nothing to export"
            )
        raise CannotExport(
            f"{name} is not a built-in base (those are {FIXTURE_BASE} and {DECIDER_BASE}); "
            "a Hugging Face base a deployment trains is a model directory on its disk already"
        )
    if out.exists() and any(out.iterdir()):
        raise CannotExport(f"{out} is not empty: export writes into a new or empty directory")
    if name == DECIDER_BASE:
        from executor.models import decider

        return decider.write_base(out, DECIDER.revision)
    model = fixture.build()
    digest = fixture.weights_sha256(model)
    meta: dict[str, object] = {
        "base_model": name,
        "revision": FIXTURE.revision,
        "base_sha256": digest,
    }
    fixture.write_model_files(out, model.state_dict(), meta)
    return digest
