"""Model directories as people outside Trainyard read them: a checkpoint loads with
transformers' Auto classes and its chat template gives the ids the trainer trained on, on
the fixture and on a Hugging Face base; `trainyard models export` writes a built-in base
whose `model.safetensors` has the `base_sha256` results name, and refuses the rest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModelForCausalLM, AutoTokenizer

from executor.models import bases, decider, fixture
from tests.support import make_local_model
from trainyard.cli import main
from trainyard.training.datasets import fixture_rows

# A system prompt, a blank message the trainer leaves out, and text beyond ASCII.
CHAT = [
    ("system", "Answer in one word."),
    ("user", "  "),
    ("user", "Reverse: café ☕ 日本\n"),
    ("assistant", "\n本日 ☕ éfac"),
]


def as_messages(chat: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in chat]


def templated(tokenizer: Any, chat: list[tuple[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(as_messages(chat), tokenize=True, return_dict=True)
    return list(ids["input_ids"])


def trained_on(chat: list[tuple[str, str]], codec: fixture.Codec) -> list[int]:
    """The ids the trainer trains on for a chat: its examples leave blank messages out."""
    kept = [(role, content) for role, content in chat if content.strip()]
    encoded = fixture.encode(kept, loss_mask="full_sequence", max_seq_length=4096, codec=codec)
    return encoded.input_ids


def logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits


def test_the_fixture_tokenizer_maps_text_to_its_utf8_bytes() -> None:
    tokenizer = fixture.tokenizer()
    text = "".join(chr(c) for c in range(0, 0x800, 3)) + "☕ 日本 \U0001f600 \r\n\t"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids == fixture.BYTES.ids(text)
    assert tokenizer.decode(ids) == text
    assert [tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id] == [
        fixture.PAD,
        fixture.BOS,
        fixture.EOS,
    ]
    assert len(tokenizer) == fixture.config().vocab_size


def assert_loads_as_trained(directory: Path, loaded: bases.Loaded) -> None:
    """The Auto classes read the checkpoint at `directory` as the trainer's `loaded` base:
    its chat template encodes chats token for token as training did, its logits agree."""
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    for chat in [CHAT, *(list(row.messages) for row in fixture_rows()[:20])]:
        assert templated(tokenizer, chat) == trained_on(chat, loaded.codec)
    model = AutoModelForCausalLM.from_pretrained(str(directory))
    ids = trained_on(CHAT, loaded.codec)
    assert torch.allclose(logits(model, ids), logits(loaded.model, ids), atol=1e-6)


def test_a_fixture_checkpoint_loads_with_auto_classes_as_it_trained(tmp_path: Path) -> None:
    loaded = bases.load("fixture-tiny-llm")
    loaded.save(tmp_path, loaded.model, {"base_model": "fixture-tiny-llm"})
    assert_loads_as_trained(tmp_path, loaded)
    assert json.loads((tmp_path / "trainyard.json").read_text())["base_model"] == "fixture-tiny-llm"


def test_a_local_base_checkpoint_keeps_its_tokenizer_and_gains_the_trainer_s_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_local_model(tmp_path / "models" / "tiny-llama")
    monkeypatch.setenv("TRAINYARD_MODELS_DIR", str(tmp_path / "models"))
    loaded = bases.load("tiny-llama")
    out = tmp_path / "checkpoint"
    loaded.save(out, loaded.model, {"base_model": "tiny-llama"})
    before = AutoTokenizer.from_pretrained(str(base))
    after = AutoTokenizer.from_pretrained(str(out))
    assert before.chat_template is None and after.get_vocab() == before.get_vocab()
    assert_loads_as_trained(out, loaded)


def export(name: str, out: Path) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, ["models", "export", name, "-o", str(out)])
    return done.exit_code, done.stdout, done.stderr


def test_export_writes_the_fixture_as_a_model_directory_named_by_its_base_sha256(
    tmp_path: Path,
) -> None:
    code, out, _ = export("fixture-tiny-llm", tmp_path / "base")
    assert code == 0
    printed = json.loads(out)
    built = fixture.build()
    assert printed["base_sha256"] == fixture.weights_sha256(built)
    weights = (tmp_path / "base" / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() == printed["base_sha256"]
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "base"))
    ids = templated(AutoTokenizer.from_pretrained(str(tmp_path / "base")), CHAT)
    assert torch.equal(logits(model, ids), logits(built, ids))


def test_export_writes_the_decider_with_the_sha256_its_capabilities_name(tmp_path: Path) -> None:
    code, out, _ = export("fixture-tiny-decider", tmp_path / "base")
    assert code == 0 and json.loads(out)["base_sha256"] == decider.BASE_SHA256
    weights = (tmp_path / "base" / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() == decider.BASE_SHA256


def test_export_refuses_what_it_cannot_write_with_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_local_model(tmp_path / "models" / "tiny-llama")
    monkeypatch.setenv("TRAINYARD_MODELS_DIR", str(tmp_path / "models"))
    code, _, err = export("tiny-llama", tmp_path / "a")
    assert code == 2 and "Hugging Face base on local disk" in err and "nothing to export" in err
    code, _, err = export("no-such-base", tmp_path / "b")
    assert code == 2 and "not a built-in base" in err
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "model.safetensors").write_bytes(b"mine")
    code, _, err = export("fixture-tiny-llm", tmp_path / "c")
    assert code == 2 and "not empty" in err
    assert (tmp_path / "c" / "model.safetensors").read_bytes() == b"mine"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
