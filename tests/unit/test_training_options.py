"""The training options at create (field-named refusals that never echo the value, the
base's defaults frozen) and the packing that keeps examples apart: an example packed
beside others has the logits it has alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.models import fixture
from executor.trainers import deepspeed
from executor.trainers.language import batches
from executor.wire.plan import Hyperparameters
from services.core import errors
from services.core.validation import parse_json_job
from services.jobs import spec
from trainyard.training.catalog import DECIDER_BASE, Catalog

FIXTURE = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}
DECIDER = {"base_model": DECIDER_BASE, "dataset": {"uri": "fixture:decisions-tiny-v1"}}


def refusal(body: dict[str, Any]) -> errors.DomainError:
    with pytest.raises(errors.DomainError) as caught:
        spec.validate(parse_json_job(body), Catalog())
    return caught.value


def with_hp(**hp: Any) -> dict[str, Any]:
    return {**FIXTURE, "hyperparameters": hp}


@pytest.mark.parametrize(
    ("body", "field", "supported"),
    [
        (with_hp(mixed_precision="fp8"), "hyperparameters.mixed_precision", "fp32,bf16,fp16"),
        (with_hp(zero_stage=4), "hyperparameters.zero_stage", None),
        (with_hp(zero_stage=-1), "hyperparameters.zero_stage", None),
        (with_hp(zero_offload="nvme"), "hyperparameters.zero_offload", "none,cpu"),
        (with_hp(lr_scheduler_type="polynomial"), "hyperparameters.lr_scheduler_type", None),
        # Offloading ZeRO's optimizer state needs a stage that partitions it.
        (with_hp(zero_offload="cpu"), "hyperparameters.zero_offload", None),
        (with_hp(zero_offload="cpu", zero_stage=0), "hyperparameters.zero_offload", None),
        # fp16 needs an accelerator: a job held to CPUs is refused.
        (
            {**with_hp(mixed_precision="fp16"), "resources": {"devices": ["cpu"]}},
            "hyperparameters.mixed_precision",
            "fp32,bf16",
        ),
        # The decider's trainer runs none of the options.
        (
            {**with_hp(packing=True), **DECIDER},
            "hyperparameters.packing",
            "",
        ),
        (
            {**with_hp(mixed_precision="bf16"), **DECIDER},
            "hyperparameters.mixed_precision",
            "fp32",
        ),
    ],
)  # fmt: skip
def test_a_bad_option_is_refused_naming_its_field(
    body: dict[str, Any], field: str, supported: str | None
) -> None:
    refused = refusal(body)
    assert refused.reason == "INVALID_REQUEST" and refused.metadata["field"] == field
    if supported is not None:
        assert refused.metadata["supported"] == supported


def test_the_options_a_job_leaves_out_are_the_bases_and_frozen() -> None:
    job = parse_json_job(with_hp(zero_stage=2, zero_offload="cpu", packing=True))
    hp = spec.expand(job, spec.validate(job, Catalog())).hyperparameters
    assert (hp.mixed_precision, hp.zero_stage, hp.zero_offload) == ("fp32", 2, "cpu")
    assert hp.packing and not hp.gradient_checkpointing and hp.lr_scheduler_type == "constant"
    for name in ("gradient_checkpointing", "packing", "mixed_precision", "lr_scheduler_type"):
        assert hp.HasField(name)  # frozen: the job answers them as they ran


def test_fp16_and_bf16_are_accepted_where_the_job_may_run_on_a_gpu() -> None:
    for precision in ("fp16", "bf16"):
        spec.validate(parse_json_job(with_hp(mixed_precision=precision)), Catalog())
    cpu = {**with_hp(mixed_precision="bf16"), "resources": {"devices": ["cpu"]}}
    spec.validate(parse_json_job(cpu), Catalog())


def test_the_catalog_lists_what_the_options_may_name() -> None:
    support = {m.name: m.support for m in Catalog().to_proto()}
    assert list(support["fixture-tiny-llm"].mixed_precisions) == ["fp32", "bf16", "fp16"]
    assert list(support["fixture-tiny-llm"].zero_stages) == [0, 1, 2, 3]
    assert list(support[DECIDER_BASE].options) == []


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(["mixed_precision", "zero_offload", "lr_scheduler_type"]),
    value=st.text(min_size=4, max_size=30).map(lambda s: "Zq9" + s),
)
def test_no_option_refusal_holds_what_was_sent(name: str, value: str) -> None:
    refused = refusal(with_hp(**{name: value}))
    assert value not in refused.message + json.dumps(refused.metadata)


def test_fp16_without_a_gpu_fails_the_run_rather_than_train_in_another_precision() -> None:
    if deepspeed.cuda():
        pytest.skip("a GPU runs fp16")
    with pytest.raises(SystemExit, match="unsupported_mixed_precision"):
        deepspeed.ds_config(Hyperparameters(mixed_precision="fp16"), 4, 2)


def test_the_deepspeed_config_is_the_jobs_options() -> None:
    hp = Hyperparameters(mixed_precision="bf16", zero_stage=2, zero_offload="cpu")
    config = deepspeed.ds_config(hp, micro_batch=4, accumulation=3)
    assert config["gradient_accumulation_steps"] == 3
    assert config["train_micro_batch_size_per_gpu"] == 4
    assert config["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    assert config["bf16"] == {"enabled": True} and config["fp16"] == {"enabled": False}


def chat(text: str) -> fixture.Encoded:
    return fixture.encode(
        [("user", text), ("assistant", text[::-1])], loss_mask="assistant_only", max_seq_length=128
    )


def test_an_example_packed_beside_others_has_its_logits_alone() -> None:
    model = fixture.build().eval()
    examples = [chat("abc"), chat("hello there"), chat("packing keeps us apart")]
    rows = batches.pack(examples, width=256)
    assert len(rows) == 1  # all three in one row
    packed = batches.packed(rows, fixture.PAD)
    with torch.no_grad():
        together = model(**packed.inputs("cpu")).logits[0]
        at = 0
        for example in examples:
            alone = model(input_ids=torch.tensor([example.input_ids])).logits[0]
            n = len(example.input_ids)
            assert torch.allclose(together[at : at + n], alone, atol=1e-5)
            at += n
    # Each example's labels sit where its tokens do, none predicting across a boundary.
    assert packed.labels[0, :at].tolist() == [t for e in examples for t in e.labels]


def test_packing_is_first_fit_in_order_within_the_width() -> None:
    sizes = [30, 40, 20, 34, 10]
    examples = [fixture.Encoded([1] * n, [fixture.IGNORE] * n) for n in sizes]
    rows = batches.pack(examples, width=64)
    assert [[len(e.input_ids) for e in row] for row in rows] == [[30, 20, 10], [40], [34]]
    step = batches.micro_batches(examples, per_device=2, accumulation=4, pad=0, pack_width=64)
    assert [m is None for m in step] == [False, False, True, True]
    assert step[0] is not None and step[0].position_ids is not None
    positions = step[0].position_ids.tolist()  # the padding is a sequence of its own
    assert positions == [[*range(30), *range(20), *range(10)], [*range(40), *range(20)]]
