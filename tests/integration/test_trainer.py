"""The DeepSpeed trainer run as the executor runs it: a subprocess reading task.json and
writing events. It learns, evaluates, serves its best checkpoint, stops when asked,
resumes where it stopped, trains across two processes, and writes outputs that load
back into the model it trained."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from google.protobuf import json_format
from safetensors.torch import load_file

from executor.models import fixture
from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.training.catalog import Catalog

FIXTURE = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}


def task_dir(
    tmp: Path,
    name: str,
    spec: dict[str, Any],
    *,
    rank: int = 0,
    world: int = 1,
    models: Path | None = None,
    **extra: Any,
) -> Path:
    """A work directory with task.json for `spec`, expanded and planned as a create would."""
    catalog = Catalog.discover(models)
    service = JobCreation(None, catalog, Config.from_env({}), None)  # type: ignore[arg-type]
    admitted = service.admit(Principal("k", "acme", "member"), parse_json_job({**FIXTURE, **spec}))
    job = json_format.MessageToDict(admitted.job, preserving_proto_field_name=True)
    job["id"] = "job_0000000000000001"
    work = tmp / name
    work.mkdir(parents=True, exist_ok=True)
    task = {
        "id": "tsk_0000000000000001",
        "role": "lead" if rank == 0 else "join",
        "rank": rank,
        "world_size": world,
    }
    task.update(extra.pop("task", {}))
    (work / "task.json").write_text(
        json.dumps({"job": job, "task": task, "output_dir": str(work / "output"), **extra})
    )
    return work


def start(work: Path, threads: int = 2, models: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if models is not None:
        env["TRAINYARD_MODELS_DIR"] = str(models)
    return subprocess.Popen(
        [sys.executable, "-m", "executor.train", str(work / "task.json")],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=open(work / "stderr.log", "w"), text=True,
    )  # fmt: skip


def events_of(proc: subprocess.Popen[str], timeout: float = 600) -> list[dict[str, Any]]:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def series(events: list[dict[str, Any]], name: str) -> dict[int, float]:
    return {e["step"]: e["value"] for e in events if e["type"] == "metric" and e["name"] == name}


def result(events: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [e for e in events if e["type"] == "result"]
    return found


def probe_matches(model: torch.nn.Module, output: Path) -> None:
    probe = load_file(str(output / "probe.safetensors"))
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=probe["input_ids"]).logits
    assert torch.allclose(logits, probe["logits"], atol=1e-5)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    work = task_dir(
        tmp_path_factory.mktemp("full"),
        "run",
        {"hyperparameters": {"max_steps": 24, "save_steps": 8}},
    )
    return work, events_of(start(work))


def test_the_fixture_learns_for_exactly_its_planned_steps(
    full_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, events = full_run
    loss = series(events, "loss")
    assert sorted(loss) == list(range(1, 25))
    assert loss[24] < 0.75 * loss[1]
    for name in ("learning_rate", "grad_norm", "tokens_per_second", "samples_per_second"):
        assert len(series(events, name)) == 24
    # Model FLOPs a second every step; what they are measured against once; no MFU on CPU.
    assert all(v > 0 for v in series(events, "model_tflops").values())
    assert list(series(events, "flops_per_token")) == [1]
    assert series(events, "mfu") == {} and series(events, "peak_tflops") == {}
    statuses = [e["status"] for e in events if e["type"] == "status"]
    assert statuses == ["accepted", "running", "finalizing"]


def test_evaluation_runs_at_the_checkpoint_cadence_and_the_best_is_served(
    full_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, events = full_run
    evals = series(events, "eval_loss")
    assert sorted(evals) == [8, 16, 24]
    block = result(events)["evaluation"]
    best = min(evals, key=lambda s: (evals[s], s))
    assert block["best_step"] == best and block["served_step"] == best and block["evaluations"] == 3
    assert block["promoted_before_last_eval"] == (best != 24)
    assert result(events)["outcome"] == {"stop_reason": "max_steps", "downgrades": []}


def test_a_checkpoint_output_loads_back_into_the_trained_model(
    full_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    work, _ = full_run
    output = work / "output"
    assert {p.name for p in output.iterdir()} == {
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "trainyard.json",
        "probe.safetensors",
    }
    model = fixture.build()
    model.load_state_dict(load_file(str(output / "model.safetensors")))
    probe_matches(model, output)
    assert json.loads((output / "trainyard.json").read_text())[
        "base_sha256"
    ] == fixture.weights_sha256(fixture.build())


def test_a_checkpoint_output_is_a_hugging_face_model_directory(
    full_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    output = full_run[0] / "output"
    tokenizer = AutoTokenizer.from_pretrained(str(output))
    chat = [("system", "Answer briefly."), ("user", "Reverse: probe"), ("assistant", "eborp")]
    messages = [{"role": role, "content": content} for role, content in chat]
    trained_on = fixture.encode(chat, loss_mask="full_sequence", max_seq_length=256)
    templated = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)
    assert templated["input_ids"] == trained_on.input_ids
    probe_matches(AutoModelForCausalLM.from_pretrained(str(output)), output)


def test_a_lora_run_writes_an_adapter_that_reproduces_the_model(tmp_path: Path) -> None:
    from peft import PeftModel

    spec = {
        "adaptation": {"mode": "lora", "rank": 4},
        "hyperparameters": {"max_steps": 6, "learning_rate": 0.01},
    }
    work = task_dir(tmp_path, "lora", spec)
    ended = result(events_of(start(work)))
    # Six steps end before the first save cadence, so the one evaluation is the last step's.
    assert ended["served_step"] == 6
    assert ended["evaluation"]["evaluations"] == 1 and ended["evaluation"]["served_step"] == 6
    output = work / "output"
    assert {"adapter_model.safetensors", "adapter_config.json"} <= {
        p.name for p in output.iterdir()
    }
    probe_matches(PeftModel.from_pretrained(fixture.build(), str(output)), output)


def test_a_capability_is_a_delta_that_rebuilds_the_model_on_its_base(tmp_path: Path) -> None:
    work = task_dir(
        tmp_path, "cap", {"output": {"kind": "capability"}, "hyperparameters": {"max_steps": 4}}
    )
    events_of(start(work))
    output = work / "output"
    manifest = json.loads((output / "capability.json").read_text())
    assert manifest["form"] == "delta" and manifest["base_sha256"] == fixture.weights_sha256(
        fixture.build()
    )
    model = fixture.build()
    delta = load_file(str(output / "delta.safetensors"))
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            tensor += delta[name]
    probe_matches(model, output)


def test_early_stopping_ends_a_run_that_stops_improving(tmp_path: Path) -> None:
    # A learning rate this high diverges after a few evaluations.
    spec = {
        "hyperparameters": {
            "max_steps": 60,
            "save_steps": 2,
            "learning_rate": 0.9,
            "early_stopping_patience": 1,
        }
    }
    events = events_of(start(task_dir(tmp_path, "early", spec)))
    final = result(events)
    assert final["outcome"]["stop_reason"] == "early_stopping" and final["step"] < 60


def test_a_cancel_saves_what_was_trained_and_a_resume_continues_it(
    tmp_path: Path, full_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    _, uninterrupted = full_run
    spec = {"hyperparameters": {"max_steps": 24, "save_steps": 8}}
    first = start(task_dir(tmp_path, "first", spec))
    assert first.stdout is not None
    for line in first.stdout:
        if '"name":"loss","step":5,' in line:
            first.send_signal(signal.SIGTERM)
            break
    events = events_of(first)
    stopped = result(events)
    assert stopped["outcome"]["stop_reason"] == "cancelled" and 5 <= stopped["step"] < 24
    assert (tmp_path / "first" / "output" / "model.safetensors").exists()

    second = task_dir(tmp_path, "second", spec, resume_dir=str(tmp_path / "first" / "state"))
    resumed = events_of(start(second))
    loss, before = series(resumed, "loss"), series(uninterrupted, "loss")
    assert min(loss) == stopped["step"] + 1 and max(loss) == 24  # the step count continues
    for step, value in loss.items():  # and so does the loss: the same run, not a restart
        assert value == pytest.approx(before[step], rel=1e-4)
    # The tokens seen continue from the state's count: both axes line up with the run
    # that was never stopped.
    seen, whole = series(resumed, "tokens_seen"), series(uninterrupted, "tokens_seen")
    assert sorted(seen) == sorted(loss)
    assert all(seen[step] == whole[step] for step in seen)
    before_stop = series(events, "tokens_seen")  # from step 5: the loop above read 1-4
    assert stopped["step"] in before_stop and all(whole[s] == v for s, v in before_stop.items())


def test_tokens_seen_counts_each_steps_examples_without_padding(
    full_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    from executor.trainers.language import data
    from executor.wire.plan import Plan

    work, events = full_run
    seen = series(events, "tokens_seen")
    assert sorted(seen) == list(range(1, 25))
    # The count as the trainer's own split and batches give it: each step adds its
    # examples' unpadded lengths, so it is cumulative and strictly growing.
    plan = Plan.load(work / "task.json")
    train, _, _ = data.examples(plan)
    batches = data.step_batches(len(train), plan)
    expected, total = {}, 0
    for step, batch in enumerate(batches[:24], start=1):
        total += sum(len(train[i].input_ids) for i in batch)
        expected[step] = total
    assert seen == expected


def test_a_cancel_before_the_first_step_leaves_no_output(tmp_path: Path) -> None:
    work = task_dir(tmp_path, "early-cancel", {"hyperparameters": {"max_steps": 24}})
    proc = start(work)
    assert proc.stdout is not None
    for line in proc.stdout:
        if '"status":"accepted"' in line:
            proc.send_signal(signal.SIGTERM)
            break
    events = events_of(proc)
    assert [e.get("status") for e in events if e["type"] == "status"][-1] == "cancelled"
    assert not any(e["type"] == "output" for e in events)


def test_two_processes_train_as_one_with_the_same_global_batch(
    tmp_path: Path, full_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    _, single = full_run
    spec = {"hyperparameters": {"max_steps": 24, "save_steps": 8}}
    lead = start(task_dir(tmp_path, "lead", spec, world=2), threads=1)
    assert lead.stdout is not None
    coordinator = ""
    lines = []
    for line in lead.stdout:
        lines.append(line)
        if '"type":"coordinator"' in line:
            coordinator = json.loads(line)["addr"]
            break
    join = start(
        task_dir(tmp_path, "join", spec, rank=1, world=2, task={"coordinator": coordinator}),
        threads=1,
    )
    rest, _ = lead.communicate(timeout=600)
    join_events = events_of(join)
    assert lead.returncode == 0 and [e["status"] for e in join_events if e["type"] == "status"] == [
        "done"
    ]
    events = [json.loads(x) for x in [*lines, *rest.splitlines()] if x.startswith("{")]
    two, one = series(events, "loss"), series(single, "loss")
    assert sorted(two) == sorted(one)
    for step in one:  # the same global batch, split over two ranks: the same curve
        assert two[step] == pytest.approx(one[step], rel=2e-3)


@pytest.mark.parametrize("family", ["llama", "phi3"])
def test_a_hugging_face_base_on_local_disk_trains_with_lora(tmp_path: Path, family: str) -> None:
    """A base saved as a user has it; Phi-3's fused attention (`qkv_proj`) takes its
    family's targets, where `q_proj`/`v_proj` once failed the run."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from tests.families import make_family_model
    from tests.support import make_local_model

    models, name = tmp_path / "models", f"tiny-{family}"
    if family == "llama":
        make_local_model(models / name)
    else:
        make_family_model(models / name, family)
    spec = {"base_model": name, "hyperparameters": {"max_steps": 8, "learning_rate": 0.01}}
    work = task_dir(tmp_path, "hf", spec, models=models)
    events = events_of(start(work, models=models))
    loss = series(events, "loss")
    assert sorted(loss) == list(range(1, 9)) and loss[8] < loss[1]
    output = work / "output"
    assert {"adapter_model.safetensors", "adapter_config.json"} <= {
        p.name for p in output.iterdir()
    }
    base = AutoModelForCausalLM.from_pretrained(str(models / name))
    probe_matches(PeftModel.from_pretrained(base, str(output)), output)


def _adapter_trained_on_the_fixture(directory: Path, steps: int = 40) -> Path:
    """An adapter as a training client saves it, trained on the fixture's chats the way
    the trainer encodes them (assistant tokens only), then packed and unpacked as an
    executor downloads it."""
    import io

    from executor.engines.lora import Engine
    from trainyard import packing
    from trainyard.training.datasets import fixture_rows

    engine = Engine("fixture-tiny-llm", {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]}, seed=0)  # fmt: skip
    data = []
    for row in fixture_rows()[:32]:
        e = fixture.encode(row.messages, loss_mask="assistant_only", max_seq_length=128)
        data.append(
            {
                "model_input": {"tokens": e.input_ids},
                "loss_fn_inputs": {
                    "target_tokens": [max(t, 0) for t in e.labels],
                    "weights": [1.0 if t != fixture.IGNORE else 0.0 for t in e.labels],
                },
            }
        )
    for step in range(steps):
        batch = data[(step * 8) % 32 :][:8]
        engine.forward_backward({"data": batch, "loss_fn": "cross_entropy"})
        engine.optim_step({"adam_params": {"learning_rate": 1e-2}})
    saved = directory / "saved"
    engine.save_weights({"name": "a"}, saved)
    unpacked = directory / "adapter"
    packing.unpack(io.BytesIO(packing.pack_bytes(saved)), unpacked)
    return unpacked


def test_a_lora_run_from_an_adapter_starts_at_the_adapters_loss(tmp_path: Path) -> None:
    adapter = _adapter_trained_on_the_fixture(tmp_path)
    spec = {
        "adaptation": {"mode": "lora", "rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]},
        "hyperparameters": {"max_steps": 2},
        "output": {"kind": "lora"},
    }
    fresh = series(events_of(start(task_dir(tmp_path, "fresh", spec))), "loss")
    work = task_dir(tmp_path, "from", spec, init_adapter_dir=str(adapter))
    events = events_of(start(work))
    started = series(events, "loss")
    assert sorted(started) == sorted(fresh) == [1, 2]
    # A fresh LoRA starts as its base (its B is zero); this one as the adapter.
    assert started[1] < fresh[1] - 0.5
    assert any(e["type"] == "log" and "adapter" in e["line"] for e in events)
    # What it wrote is the adapter it continued: it loads into the same peft shape.
    written = load_file(str(work / "output" / "adapter_model.safetensors"))
    assert set(written) == set(load_file(str(adapter / "adapter_model.safetensors")))


def test_an_adapter_of_another_shape_fails_the_run(tmp_path: Path) -> None:
    adapter = _adapter_trained_on_the_fixture(tmp_path, steps=1)
    spec = {"adaptation": {"mode": "lora", "rank": 4}, "hyperparameters": {"max_steps": 1}}
    work = task_dir(tmp_path, "wrong", spec, init_adapter_dir=str(adapter))
    proc = start(work)
    proc.communicate(timeout=600)
    assert proc.returncode != 0


@pytest.mark.parametrize(
    ("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)]
)
def test_the_base_is_held_in_the_precision_the_job_names(
    tmp_path: Path, precision: str, dtype: torch.dtype
) -> None:
    spec = {"hyperparameters": {"max_steps": 2, "base_load_precision": precision}}
    work = task_dir(tmp_path, precision, spec)
    events = events_of(start(work))
    assert f"base loaded in {precision}" in [e["line"] for e in events if e["type"] == "log"]
    weights = load_file(str(work / "output" / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {dtype}
    # The digest names the base as published, whatever dtype it trained in.
    assert result(events)["base_sha256"] == fixture.weights_sha256(fixture.build())


def test_the_jobs_seed_fixes_the_adapters_init(tmp_path: Path) -> None:
    """The same LoRA job starts from the same adapter in every process (the bare loop of
    bench/training.py trains to equal losses on it); another seed, another adapter."""
    from peft import get_peft_model_state_dict

    from executor.trainers.language.run import adapted
    from executor.wire.plan import Adaptation, Hyperparameters, Job, Plan, Task

    def adapter(seed: int) -> dict[str, torch.Tensor]:
        job = Job(
            adaptation=Adaptation(mode="lora", rank=4, alpha=8, targets=("q_proj", "v_proj")),
            hyperparameters=Hyperparameters(seed=seed),
        )
        torch.seed()  # the process's generator anywhere (seeded at random)
        model = adapted(fixture.build(), Plan(job, Task(), tmp_path, tmp_path), lambda _: None)
        return get_peft_model_state_dict(model)  # type: ignore[no-any-return]

    first, again, other = adapter(7), adapter(7), adapter(8)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)
