"""What a training step's throughput means in model FLOPs, and how much of the device's
dense peak it used (model FLOPs utilisation, MFU).

FLOPs per trained token, following PaLM (Chowdhery et al. 2022, "PaLM: Scaling Language
Modeling with Pathways", appendix B) and Kaplan et al. 2020 ("Scaling Laws for Neural
Language Models", §2.1):

- the dense term: a matmul of N weights costs 2N FLOPs a token forward, 2N for the
  gradients of its input and 2N for those of its weights. A full fine-tune pays all three,
  6N; a LoRA run pays the forward and the input gradients of the frozen base, 4N, and all
  three only on the adapter's N_lora weights: 4N + 6N_lora.
- the attention term: the score and value matmuls, 4·L·d a token per token of context
  forward and twice that backward, 12·L·d·T for a token of a T-token example (PaLM's
  12·L·H·Q·T, with d = H·Q); over an example's T tokens, 12·L·d·T². It has no weights, so
  LoRA pays it whole.

N counts the weights that multiply activations: every parameter but the input embedding
table, which is a lookup (counted when the output head shares it). Padding is not a
token: only the examples' own tokens count, as in `tokens_per_second`.

MFU is the model FLOPs a second over the device's dense peak (no sparsity) at the
precision the run computes in, from `PEAKS`; a device not in it (the CPU) has no peak
and no MFU.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any

# Dense peaks in TFLOP/s, from the vendors' data sheets: (name tokens, bf16/fp16 tensor
# core, fp32 without TF32, as torch multiplies fp32 by default). First match wins, so a
# variant comes before its family. A device without bf16 (V100, T4) lists its fp16 peak.
PEAKS: tuple[tuple[tuple[str, ...], float, float], ...] = (
    (("H200",), 989.4, 66.9),
    (("GH200",), 989.4, 66.9),
    (("H100", "PCIE"), 756.0, 51.2),
    (("H100", "NVL"), 835.0, 60.0),
    (("H100",), 989.4, 66.9),
    (("A100",), 312.0, 19.5),
    (("L40S",), 362.05, 91.6),
    (("L40",), 181.05, 90.5),
    (("L4",), 121.0, 30.3),
    (("A10",), 125.0, 31.2),
    (("V100",), 125.0, 15.7),
    (("T4",), 65.0, 8.1),
)
HALF = frozenset({"bf16", "fp16"})


def peak_tflops(device: str, precision: str) -> float | None:
    """The dense peak of a device by its name (`torch.cuda.get_device_name`) at a
    precision (`bf16`, `fp16`, `fp32`); None for a device the table does not know."""
    tokens = set(re.split(r"[^A-Z0-9]+", device.upper()))
    for names, half, single in PEAKS:
        if tokens.issuperset(names):
            return half if precision in HALF else single
    return None


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the FLOPs of a token depend on."""

    dense: int  # weights that multiply activations (N)
    adapter: int  # of those, the adapter's (N_lora); 0 for a full fine-tune
    layers: int  # L
    attention_width: int  # d = heads × head dim

    def flops_per_token(self) -> float:
        """The dense term of a trained token: 6N, or 4N + 6N_lora with an adapter."""
        if self.adapter:
            return 4.0 * (self.dense - self.adapter) + 6.0 * self.adapter
        return 6.0 * self.dense

    def step_flops(self, lengths: Iterable[int]) -> float:
        """A step's model FLOPs over its examples' lengths: the dense term for every
        token, the attention term for every example."""
        per_token = self.flops_per_token()
        attention = 12.0 * self.layers * self.attention_width
        return sum(per_token * t + attention * t * t for t in lengths)


def shape_of(model: Any, adapter: bool) -> Shape:
    """The Shape of a Hugging Face causal LM (or a peft model around one); `adapter`
    when only its trainable parameters (a LoRA's) take weight gradients."""
    params = dict(model.named_parameters())
    dense = sum(p.numel() for p in params.values())
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    if output is None or output.weight is not embedding:
        dense -= embedding.numel()  # a lookup, not a matmul
    trained = sum(p.numel() for p in params.values() if p.requires_grad) if adapter else 0
    config = model.config
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return Shape(dense, trained, config.num_hidden_layers, heads * head_dim)


@dataclasses.dataclass(frozen=True)
class Rates:
    """One step's throughput."""

    tokens_per_second: float
    samples_per_second: float
    model_tflops: float  # model FLOPs a second, in TFLOP/s
    mfu: float | None  # of the device's dense peak; None without a peak


def rates(shape: Shape, lengths: Sequence[int], seconds: float, peak: float | None) -> Rates:
    """A step's throughput: its examples (their token counts) trained in `seconds`."""
    seconds = max(seconds, 1e-9)
    achieved = shape.step_flops(lengths) / seconds / 1e12
    return Rates(
        tokens_per_second=sum(lengths) / seconds,
        samples_per_second=len(lengths) / seconds,
        model_tflops=achieved,
        mfu=achieved / peak if peak else None,
    )
