"""Tiny random models of the families users bring (Llama, Qwen2, Qwen3, Mistral, Gemma,
Phi-3), built in code and saved as a user would have them on disk: a config of the family's
transformers class, sharded safetensors, and a byte-level BPE tokenizer trained in code on
the fixture's chats, carrying the family's special tokens and chat template."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

# Each family's chat template, shortened from the one its published tokenizer carries.
LLAMA = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'assistant' %}"
    "{{ ' ' + m['content'] + eos_token }}{% else %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
    "{% endif %}{% endfor %}"
)
GEMMA = (
    "{{ bos_token }}{% for m in messages %}{% set role = 'model' if m['role'] == 'assistant' "
    "else 'user' %}<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
PHI3 = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% else %}{{ eos_token }}{% endif %}"
)


@dataclasses.dataclass(frozen=True)
class Family:
    """One family: its transformers config class, its tokenizer's special tokens (bos,
    eos, pad, then others) and chat template, and what its configs differ in."""

    model_type: str
    config: str
    specials: tuple[str | None, str, str]
    extra_tokens: tuple[str, ...]
    template: str
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)


FAMILIES = {
    "llama": Family(
        "llama", "LlamaConfig", ("<|begin_of_text|>", "<|eot_id|>", "<|finetune_pad|>"),
        ("<|start_header_id|>", "<|end_header_id|>"), LLAMA,
    ),
    "qwen2": Family(
        "qwen2", "Qwen2Config", (None, "<|im_end|>", "<|endoftext|>"), ("<|im_start|>",), CHATML,
        {"tie_word_embeddings": True},
    ),
    "qwen3": Family(
        "qwen3", "Qwen3Config", (None, "<|im_end|>", "<|endoftext|>"), ("<|im_start|>",), CHATML,
        {"head_dim": 16, "tie_word_embeddings": True},
    ),
    "mistral": Family(
        "mistral", "MistralConfig", ("<s>", "</s>", "<unk>"), ("[INST]", "[/INST]"), MISTRAL,
        {"sliding_window": None},
    ),
    "gemma": Family(
        "gemma", "GemmaConfig", ("<bos>", "<eos>", "<pad>"), ("<start_of_turn>", "<end_of_turn>"),
        GEMMA, {"head_dim": 16},
    ),
    "phi3": Family(
        "phi3", "Phi3Config", ("<s>", "<|endoftext|>", "<|placeholder1|>"),
        ("<|user|>", "<|assistant|>", "<|system|>", "<|end|>"), PHI3,
        {"original_max_position_embeddings": 512},
    ),
}  # fmt: skip


def tokenizer(family: Family) -> Any:
    """A byte-level BPE trained on the fixture's chats, with the family's special tokens
    (added first, so they take the lowest ids) and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from trainyard.training.datasets import fixture_rows

    bos, eos, pad = family.specials
    specials = [t for t in (pad, bos, eos, *family.extra_tokens) if t is not None]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [content for row in fixture_rows() for _, content in row.messages]
    tok.train_from_iterator([*corpus, "user\n", "assistant\n", "system\n", "model\n"], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        chat_template=family.template,
        model_max_length=512,
    )


def make_family_model(directory: Path, name: str, *, seed: int = 1) -> Path:
    """A seeded two-layer model of the family `name` (hidden 64) with its tokenizer, saved
    in `directory` as sharded safetensors."""
    import torch
    import transformers

    family = FAMILIES[name]
    directory.mkdir(parents=True, exist_ok=True)
    fast = tokenizer(family)
    fast.save_pretrained(str(directory))
    config = getattr(transformers, family.config)(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, **family.settings,
    )  # fmt: skip
    config.architectures = [type(config).__name__.replace("Config", "ForCausalLM")]
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(str(directory), safe_serialization=True, max_shard_size="100KB")
    return directory
