"""The built-in base `fixture-tiny-llm`: a Llama-style causal LM built from a config with
a seeded init, and a byte-level tokenizer. No download: the same weights on every machine.

Chats are encoded as bytes: `<bos>`, then each message as `<|role|>\\n` + its text +
`<eos>`. With `assistant_only` the loss sees an assistant message's text and its `<eos>`;
with `full_sequence` it sees everything after `<bos>`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors.torch import save
from transformers import LlamaConfig, LlamaForCausalLM

from trainyard.training.catalog import FixtureArchitecture

PAD, BOS, EOS = 256, 257, 258
IGNORE = -100
SEED = 0


def config() -> LlamaConfig:
    arch = FixtureArchitecture()
    return LlamaConfig(
        vocab_size=arch.vocab_size,
        hidden_size=arch.hidden_size,
        intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_hidden_layers,
        num_attention_heads=arch.num_attention_heads,
        num_key_value_heads=arch.num_key_value_heads,
        max_position_embeddings=arch.max_position_embeddings,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        tie_word_embeddings=False,
    )


def build() -> LlamaForCausalLM:
    """The base model, identical on every machine: the seed fixes the init."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(SEED)
    try:
        model = LlamaForCausalLM(config())
    finally:
        torch.random.set_rng_state(generator_state)
    model.config.use_cache = False
    return model


def weights_sha256(model: torch.nn.Module) -> str:
    """The sha256 of a model's weights as safetensors bytes (names in order)."""
    state = {k: v.detach().contiguous().cpu() for k, v in sorted(model.state_dict().items())}
    return hashlib.sha256(save(state)).hexdigest()


def tokenizer_json() -> dict[str, object]:
    return {
        "type": "bytes",
        "vocab_size": FixtureArchitecture().vocab_size,
        "pad": PAD,
        "bos": BOS,
        "eos": EOS,
    }


@dataclasses.dataclass(frozen=True)
class Codec:
    """How one base turns text into token ids."""

    ids: Callable[[str], list[int]]
    bos: int | None
    eos: int
    pad: int


BYTES = Codec(ids=lambda text: list(text.encode()), bos=BOS, eos=EOS, pad=PAD)


@dataclasses.dataclass(frozen=True)
class Encoded:
    input_ids: list[int]
    labels: list[int]

    @property
    def trained_tokens(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def encode(
    messages: Sequence[tuple[str, str]],
    *,
    loss_mask: str,
    max_seq_length: int,
    codec: Codec = BYTES,
) -> Encoded:
    """One chat as token ids and the labels the loss sees (IGNORE elsewhere), cut at
    `max_seq_length` tokens."""
    ids, trained = ([codec.bos], [False]) if codec.bos is not None else ([], [])
    for role, content in messages:
        header = codec.ids(f"<|{role}|>\n")
        body = [*codec.ids(content), codec.eos]
        learn = loss_mask == "full_sequence" or role == "assistant"
        ids += header + body
        trained += [loss_mask == "full_sequence"] * len(header) + [learn] * len(body)
    ids, trained = ids[:max_seq_length], trained[:max_seq_length]
    # Causal LM labels are the next token: the model predicts ids[i+1] at position i.
    labels = [ids[i + 1] if trained[i + 1] else IGNORE for i in range(len(ids) - 1)] + [IGNORE]
    return Encoded(ids, labels)


def collate(
    batch: Sequence[Encoded], pad: int = PAD
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, e in enumerate(batch):
        ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
        labels[row, : len(e.labels)] = torch.tensor(e.labels)
        mask[row, : len(e.input_ids)] = 1
    return ids, labels, mask


def write_model_files(
    directory: Path, state: dict[str, torch.Tensor], extra: dict[str, object]
) -> None:
    """A whole checkpoint: safetensors weights, the config and the tokenizer."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in sorted(state.items())}
    (directory / "model.safetensors").write_bytes(save(tensors))
    (directory / "config.json").write_text(json.dumps(config().to_dict(), indent=2, sort_keys=True))
    (directory / "tokenizer.json").write_text(
        json.dumps(tokenizer_json(), indent=2, sort_keys=True)
    )
    (directory / "trainyard.json").write_text(json.dumps(extra, indent=2, sort_keys=True))
