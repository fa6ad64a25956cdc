"""The families users bring, as the catalog reads them: each base's linear modules from
its weights, its family's default LoRA targets (agreeing with peft's mapping), a job or
client that names none given them, targets a base lacks refused naming the field, and a
revision that is the sha256 of its files, hashed once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT

from services.claims.clients import requests
from services.core import errors
from services.core.attempt_logs import MAX_ERROR_CHARS, error_line
from services.core.validation import parse_json_job
from services.jobs import spec
from tests.families import FAMILIES, make_family_model
from trainyard.client.v1 import client_service_pb2
from trainyard.training import families, pins
from trainyard.training.catalog import Catalog

DATASET = {"uri": "fixture:synthetic-tiny-v1"}
SEPARATE = ("down_proj", "gate_proj", "up_proj", "k_proj", "o_proj", "q_proj", "v_proj")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("families")
    for name in FAMILIES:
        make_family_model(root / f"tiny-{name}", name)
    return root


def test_the_family_table_agrees_with_peft_wherever_peft_has_an_entry() -> None:
    shared = [m for m in families.LORA_TARGETS if m in PEFT]
    assert {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"} <= set(shared)
    for model_type in shared:
        assert list(families.LORA_TARGETS[model_type]) == list(PEFT[model_type]), model_type


def test_each_family_lists_its_linear_modules_and_its_default_targets(models: Path) -> None:
    catalog = Catalog.discover(models)
    for name in FAMILIES:
        base = catalog.get(f"tiny-{name}")
        assert base is not None, name
        assert len(list((models / f"tiny-{name}").glob("*.safetensors"))) > 1  # sharded
        if name == "phi3":  # fused attention and MLP projections
            assert base.targets == ("down_proj", "gate_up_proj", "o_proj", "qkv_proj")
            assert base.default_targets == ("qkv_proj",)
        else:
            assert base.targets == SEPARATE and base.default_targets == ("q_proj", "v_proj")
        support = base.to_proto().support
        assert list(support.targets) == list(base.targets)
        assert list(support.default_targets) == list(base.default_targets)
        assert base.revision == pins.revision(models / f"tiny-{name}")


def test_a_family_the_table_lacks_falls_back_on_the_modules_it_has() -> None:
    assert families.default_targets("phi3", ("qkv_proj", "o_proj")) == ("qkv_proj",)
    assert families.default_targets("olmo", SEPARATE) == ("q_proj", "v_proj")
    assert families.default_targets("falcon", ("query_key_value", "dense")) == ("query_key_value",)
    assert families.default_targets("odd", ("wq", "wv")) == ("wq", "wv")
    tensors = {
        "transformer.h.0.attn.c_attn.weight": {"shape": [8, 24]},
        "transformer.h.0.ln_1.weight": {"shape": [8]},
        "transformer.h.1.mlp.c_fc.weight": {"shape": [8, 32]},
        "transformer.wte.weight": {"shape": [50, 8]},
        "lm_head.weight": {"shape": [50, 8]},
        "model.layers.0.embed_scale.weight": {"shape": [8, 8]},
    }
    assert families.targetable(tensors) == ("c_attn", "c_fc")


def job_on(base: str, **adaptation: object) -> object:
    return parse_json_job(
        {"base_model": base, "dataset": DATASET, "adaptation": {"mode": "lora", **adaptation}}
    )


def test_a_job_or_client_naming_no_targets_gets_its_familys(models: Path) -> None:
    catalog = Catalog.discover(models)
    for name, expected in (("phi3", ["qkv_proj"]), ("gemma", ["q_proj", "v_proj"])):
        job = job_on(f"tiny-{name}")
        expanded = spec.expand(job, spec.validate(job, catalog))  # type: ignore[arg-type]
        assert list(expanded.adaptation.targets) == expected
        request = client_service_pb2.CreateTrainingClientRequest(base_model=f"tiny-{name}")
        _, adaptation, _ = requests.adaptation_of(request, catalog)
        assert list(adaptation.targets) == expected


def test_targets_a_base_lacks_are_refused_naming_the_field(models: Path) -> None:
    catalog = Catalog.discover(models)
    job = job_on("tiny-phi3", targets=["q_proj", "v_proj"])
    with pytest.raises(errors.DomainError) as refused:
        spec.validate(job, catalog)  # type: ignore[arg-type]
    assert refused.value.reason == "UNSUPPORTED_ADAPTATION"
    assert refused.value.metadata == {
        "field": "adaptation.targets",
        "supported": "down_proj,gate_up_proj,o_proj,qkv_proj",
    }
    request = client_service_pb2.CreateTrainingClientRequest(
        base_model="tiny-phi3", lora_config={"targets": ["q_proj"]}
    )
    with pytest.raises(errors.DomainError) as client:
        requests.adaptation_of(request, catalog)
    assert client.value.metadata["field"] == "lora_config.targets"
    assert "q_proj" not in client.value.message


def test_a_revision_is_the_hash_of_the_files_each_read_once(
    models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(models / "tiny-qwen2", copy)
    first = pins.revision(copy)
    assert first == pins.revision(models / "tiny-qwen2")  # the bytes, not the place

    def no_reads(*_: object, **__: object) -> None:
        raise AssertionError("a file was read again")

    monkeypatch.setattr(Path, "open", no_reads)
    assert pins.revision(copy) == first  # unchanged files: their digests are remembered
    monkeypatch.undo()
    config = copy / "config.json"
    config.write_text(config.read_text().replace('"rms_norm_eps"', '"rms_norm_eps" '))
    os.utime(config, ns=(1, 1))
    assert pins.revision(copy) != first


def test_a_failure_message_takes_the_last_exception_line_of_the_log() -> None:
    log = (
        'step 1\nTraceback (most recent call last):\n  File "x.py", line 3, in <module>\n'
        "ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model.\n"
        "[rank0] done\n"
    )
    assert (
        error_line(log)
        == "ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model."
    )
    assert error_line("torch.OutOfMemoryError: CUDA out of memory\x1b[0m") == (
        "torch.OutOfMemoryError: CUDA out of memory [0m"
    )
    assert error_line("KeyboardInterrupt\n") == "KeyboardInterrupt"
    assert error_line("all fine\nstep 2 loss 1.0\n") == ""
    # The executor's paths stay on the executor; a module path or a ratio is not one.
    assert error_line("FileNotFoundError: [Errno 2] No such file: '/srv/work/tsk_1/x.bin'") == (
        "FileNotFoundError: [Errno 2] No such file: '…'"
    )
    assert error_line("ValueError: 3/4 of a.b/c") == "ValueError: 3/4 of a.b/c"
    long = error_line("RuntimeError: " + "x" * 500)
    assert len(long) == MAX_ERROR_CHARS and long.endswith("…")


def test_a_bases_chats_are_encoded_with_its_own_template(models: Path) -> None:
    """The ids `apply_chat_template` gives, the loss on the assistant's turns and their
    ends alone (Phi-3's template closes a conversation with its eos: that is learned too)."""
    from transformers import AutoTokenizer

    from executor.models import chat

    messages = [("system", "be brief"), ("user", "hi"), ("assistant", "hello"),
                ("user", "again"), ("assistant", "sure")]  # fmt: skip
    ends = {"llama": "<|eot_id|>", "qwen2": "<|im_end|>\n", "qwen3": "<|im_end|>\n",
            "mistral": "</s>", "gemma": "<end_of_turn>\n", "phi3": "<|end|>\n"}  # fmt: skip
    for family, end in ends.items():
        tokenizer = AutoTokenizer.from_pretrained(str(models / f"tiny-{family}"))
        encode = chat.encoder(tokenizer)
        assert encode is not None
        ids, trained = encode(messages, "assistant_only")
        turns = [{"role": r, "content": c} for r, c in messages]
        assert ids == tokenizer.apply_chat_template(turns, tokenize=True, return_dict=False)
        learned = tokenizer.decode([i for i, t in zip(ids, trained, strict=True) if t])
        space = " " if family == "mistral" else ""
        closing = tokenizer.eos_token if family == "phi3" else ""
        assert learned == f"{space}hello{end}{space}sure{end}{closing}", family
        assert all(encode(messages, "full_sequence")[1])


def test_an_executor_holding_other_bytes_under_the_name_refuses_the_task(
    models: Path, tmp_path: Path
) -> None:
    import shutil

    from executor.agent import pinned
    from trainyard.job.v1 import job_pb2

    shutil.copytree(models / "tiny-gemma", tmp_path / "models" / "tiny-gemma")
    env = {"TRAINYARD_MODELS_DIR": str(tmp_path / "models")}
    pin = pins.revision(models / "tiny-gemma")
    assert pinned.refusal(job_pb2.Job(base_model="tiny-gemma", revision=pin), env) == ""
    make_family_model(tmp_path / "models" / "tiny-gemma", "gemma", seed=2)
    assert pinned.refusal(job_pb2.Job(base_model="tiny-gemma", revision=pin), env) == (
        "base_changed"
    )
    # A job from before bases were pinned, and a base this executor lacks: the trainer's.
    assert pinned.refusal(job_pb2.Job(base_model="tiny-gemma", revision="local"), env) == ""
    assert pinned.refusal(job_pb2.Job(base_model="absent", revision=pin), env) == ""
    assert pinned.refusal(job_pb2.Job(base_model="fixture-tiny-llm", revision="v1"), env) == ""


def test_a_base_whose_head_shares_its_embeddings_has_a_weights_digest(models: Path) -> None:
    """Gemma and the small Qwens tie their head to their embeddings: the digest a result
    names (`base_sha256`) is still read, and is the same for the same weights."""
    from transformers import AutoModelForCausalLM

    from executor.models import fixture

    for family in ("gemma", "qwen2"):
        model = AutoModelForCausalLM.from_pretrained(str(models / f"tiny-{family}"))
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        digest = fixture.weights_sha256(model)
        assert len(digest) == 64 and digest == fixture.weights_sha256(model)
