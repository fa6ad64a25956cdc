"""The built-in base `fixture-tiny-llm`: a Llama-style causal LM built from a config with
a seeded init, and a byte-level tokenizer. No download: the same weights on every machine.

Chats are encoded as bytes: `<bos>`, then each message as `<|role|>\\n` + its text +
`<eos>`. With `assistant_only` the loss sees an assistant message's text and its `<eos>`;
with `full_sequence` it sees everything after `<bos>`. `CHAT_TEMPLATE` is that encoding as
a Hugging Face chat template, so a checkpoint's tokenizer repeats it outside Trainyard.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors.torch import save
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

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
        architectures=["LlamaForCausalLM"],
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
    """The sha256 of a model's weights as safetensors bytes (names in order). A tensor
    tied to one already named (a head sharing the embeddings, as Gemma's and small Qwens'
    do) is written again under its own name: safetensors holds no shared storage."""
    state, seen = {}, set()
    for name, tensor in sorted(model.state_dict().items()):
        held = tensor.detach().contiguous().cpu()
        storage = held.untyped_storage().data_ptr()
        state[name] = held.clone() if storage in seen else held
        seen.add(storage)
    return hashlib.sha256(save(state)).hexdigest()


# How `encode` lays out a chat, for `apply_chat_template`: the same bytes and special
# tokens, so a tokenizer that splits at the header's newline and at its special tokens (the
# fixture's bytes, byte-level BPE) gives the trainer's ids. Messages with blank text are left
# out, as the trainer leaves them out of its examples.
CHAT_TEMPLATE = (
    "{% if bos_token %}{{ bos_token }}{% endif %}"
    "{% for message in messages %}{% if message['content'] | trim %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def tokenizer() -> PreTrainedTokenizerFast:
    """The byte tokenizer as a `tokenizers` one, for Hugging Face tools: each UTF-8 byte is
    its own id (byte-level pre-tokenizer, a BPE with no merges), then pad, bos and eos,
    with `CHAT_TEMPLATE`. It encodes text exactly as `BYTES` does."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    # The byte-level pre-tokenizer writes byte b as the character bytes_to_unicode()[b].
    vocab = {char: byte for byte, char in bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    specials = {PAD: "<pad>", BOS: "<bos>", EOS: "<eos>"}
    # Added after the 256 bytes, in id order: they take ids 256, 257 and 258.
    tok.add_special_tokens([AddedToken(specials[i], special=True) for i in sorted(specials)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=specials[PAD],
        bos_token=specials[BOS],
        eos_token=specials[EOS],
        chat_template=CHAT_TEMPLATE,
        model_max_length=FixtureArchitecture().max_position_embeddings,
    )


@dataclasses.dataclass(frozen=True)
class Codec:
    """How one base turns text into token ids."""

    ids: Callable[[str], list[int]]
    bos: int | None
    eos: int
    pad: int
    # A base's own chat template (`executor.models.chat`): its ids and what the loss
    # sees; None encodes chats in the fixture's format.
    chat: Callable[[Sequence[tuple[str, str]], str], tuple[list[int], list[bool]]] | None = None


BYTES = Codec(ids=lambda text: list(text.encode()), bos=BOS, eos=EOS, pad=PAD)


@dataclasses.dataclass(frozen=True)
class Encoded:
    input_ids: list[int]
    labels: list[int]
    # Whether `max_seq_length` cut the chat short.
    truncated: bool = False

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
    if codec.chat is not None:
        ids, trained = codec.chat(messages, loss_mask)
        return _labelled(ids, trained, max_seq_length)
    ids, trained = ([codec.bos], [False]) if codec.bos is not None else ([], [])
    for role, content in messages:
        header = codec.ids(f"<|{role}|>\n")
        body = [*codec.ids(content), codec.eos]
        learn = loss_mask == "full_sequence" or role == "assistant"
        ids += header + body
        trained += [loss_mask == "full_sequence"] * len(header) + [learn] * len(body)
    return _labelled(ids, trained, max_seq_length)


def _labelled(ids: list[int], trained: list[bool], max_seq_length: int) -> Encoded:
    truncated = len(ids) > max_seq_length
    ids, trained = ids[:max_seq_length], trained[:max_seq_length]
    # Causal LM labels are the next token: the model predicts ids[i+1] at position i.
    labels = [ids[i + 1] if trained[i + 1] else IGNORE for i in range(len(ids) - 1)] + [IGNORE]
    return Encoded(ids, labels, truncated)


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
    """A whole checkpoint as a Hugging Face model directory (safetensors weights, the
    config, the tokenizer with its chat template), and Trainyard's own `trainyard.json`.
    The weights' bytes are those `weights_sha256` hashes, so a base written here has the
    file sha256 that results name as `base_sha256`."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in sorted(state.items())}
    (directory / "model.safetensors").write_bytes(save(tensors))
    (directory / "config.json").write_text(json.dumps(config().to_dict(), indent=2, sort_keys=True))
    # The template inside tokenizer_config.json, where older transformers read it too.
    tokenizer().save_pretrained(str(directory), save_jinja_files=False)
    (directory / "trainyard.json").write_text(json.dumps(extra, indent=2, sort_keys=True))
