"""Model FLOPs and MFU (executor/trainers/throughput.py) against numbers worked by hand."""

from __future__ import annotations

import pytest

from executor.trainers.throughput import Shape, peak_tflops, rates, shape_of


@pytest.mark.parametrize(
    ("device", "precision", "peak"),
    [
        ("NVIDIA H200", "bf16", 989.4),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 80GB HBM3", "fp32", 66.9),
        ("NVIDIA H100 PCIe", "bf16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5),
        ("NVIDIA A100-SXM4-80GB", "fp16", 312.0),
        ("NVIDIA A10", "bf16", 125.0),  # not the A100
        ("NVIDIA L4", "bf16", 121.0),  # not the L40S
        ("NVIDIA L40S", "bf16", 362.05),
        ("Tesla T4", "fp16", 65.0),
        ("cpu", "fp32", None),
        ("Some Future GPU", "bf16", None),
    ],
)
def test_the_dense_peak_comes_from_the_table(
    device: str, precision: str, peak: float | None
) -> None:
    assert peak_tflops(device, precision) == peak


def test_a_full_fine_tune_counts_six_n_and_attention() -> None:
    shape = Shape(dense=1_000_000_000, adapter=0, layers=24, attention_width=1024)
    assert shape.flops_per_token() == 6e9
    # 8 examples of 512 tokens in a second: 6e9·4096 dense, 12·24·1024·512²·8 attention.
    r = rates(shape, [512] * 8, 1.0, 989.4)
    assert r.tokens_per_second == 4096
    assert r.samples_per_second == 8
    assert r.model_tflops == pytest.approx(24.576 + 0.618475290624)
    assert r.mfu == pytest.approx(25.194475290624 / 989.4)


def test_lora_pays_the_base_forward_and_input_gradients_only() -> None:
    # 4·(N − N_lora) + 6·N_lora: the adapter's weights are part of N.
    shape = Shape(dense=1_000_000_000 + 4_000_000, adapter=4_000_000, layers=2, attention_width=8)
    assert shape.flops_per_token() == 4e9 + 24e6
    # Two examples of 10 and 20 tokens in half a second; attention 12·2·8·(10² + 20²).
    r = rates(shape, [10, 20], 0.5, None)
    assert r.model_tflops == pytest.approx((4.024e9 * 30 + 192 * 500) / 0.5 / 1e12)
    assert r.tokens_per_second == 60 and r.samples_per_second == 4
    assert r.mfu is None  # no peak (the CPU): no MFU


def test_the_shape_of_a_real_model_counts_its_matmul_weights() -> None:
    """A Llama of 2 layers, width 8, MLP 16, vocabulary 10, untied: 80 embedding weights
    (a lookup, not counted), 2 × (4·64 attention + 3·128 MLP + 2·8 norms) + 8 + 80 head
    = 1,400; a LoRA of rank 2 on q_proj and v_proj adds 2 layers × 2 × (16 + 16) = 128."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=10,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    full = shape_of(LlamaForCausalLM(config), adapter=False)
    assert full == Shape(dense=1400, adapter=0, layers=2, attention_width=8)
    assert full.flops_per_token() == 8400
    lora = get_peft_model(
        LlamaForCausalLM(config), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    )
    shape = shape_of(lora, adapter=True)
    assert shape == Shape(dense=1528, adapter=128, layers=2, attention_width=8)
    assert shape.flops_per_token() == 4 * 1400 + 6 * 128
