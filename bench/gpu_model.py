"""A random-initialised Qwen2 of about 0.5B parameters, built in code and saved as a
Hugging Face model directory (bf16 safetensors, a byte-level BPE tokenizer trained in code
with a chat template), for bench/gpu.sh to train from a temporary TRAINYARD_MODELS_DIR.
Nothing is downloaded. Its shape follows Qwen2.5-0.5B's (24 layers, grouped-query
attention with 2 key-value heads), wider to make up for a small vocabulary; its embeddings
are untied (the trainer cannot hash tied ones yet: safetensors refuses shared tensors).

    python -m bench.gpu_model DIR [--small]     --small: the same model, 2 layers of width 64
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.recipe import long_rows
from executor.models import fixture
from trainyard.training.datasets import fixture_rows

HALF: dict[str, Any] = {"hidden_size": 1280, "intermediate_size": 4480, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 2}  # fmt: skip
SMALL: dict[str, Any] = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip


def build(directory: Path, shape: dict[str, Any]) -> int:
    """Write the model to `directory`; its parameter count."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    rows = [*fixture_rows(), *long_rows(16, 64)]
    tok.train_from_iterator([content for row in rows for _, content in row.messages], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = fixture.CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(fast), max_position_embeddings=2048, tie_word_embeddings=False,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, **shape,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config)
    # transformers' stubs type `to` oddly
    model.to(dtype=torch.bfloat16)  # type: ignore[call-arg]
    model.save_pretrained(str(directory), safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    count = build(args.directory, SMALL if args.small else HALF)
    print(f"{args.directory.name}: a random Qwen2 of {count / 1e6:,.1f}M parameters")


if __name__ == "__main__":
    main()
