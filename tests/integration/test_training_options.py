"""The training options run as the executor runs a trainer (a subprocess reading
task.json): every ZeRO stage, with the optimizer offloaded too, trains the same curve as
ZeRO 0; gradient checkpointing and packing change nothing a user sees but memory and
speed; the schedules follow transformers' formulas; the examples `max_seq_length` cut are
counted; bf16 trains on a CPU. fp16 and bf16's speed need a GPU (bench/gpu_options.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from executor.trainers.language import data
from executor.wire.plan import Plan
from tests.integration.test_trainer import events_of, series, start, task_dir

STEPS = 4
# A full run's recipe every comparison shares: two micro-batches a step, no evaluation
# until the last step.
RECIPE = {"max_steps": STEPS, "save_steps": 100, "gradient_accumulation_steps": 2}
# What separates two runs of the same sums added in another order.
SAME = 2e-4


def run(tmp: Path, name: str, options: dict[str, Any], **spec: Any) -> list[dict[str, Any]]:
    work = task_dir(tmp, name, {"hyperparameters": {**RECIPE, **options}, **spec})
    return events_of(start(work))


def frozen(work: Path) -> dict[str, Any]:
    hp: dict[str, Any] = json.loads((work / "task.json").read_text())["job"]["hyperparameters"]
    return hp


def assert_same_curve(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    ours, theirs = series(got, "loss"), series(want, "loss")
    assert sorted(ours) == list(range(1, STEPS + 1)) == sorted(theirs)
    for step in theirs:
        assert ours[step] == pytest.approx(theirs[step], rel=SAME), step
    assert ours[STEPS] < ours[1]  # and it learns


@pytest.fixture(scope="module")
def zero0(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run(tmp_path_factory.mktemp("zero0"), "run", {})


@pytest.fixture(scope="module")
def lora(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run(tmp_path_factory.mktemp("lora"), "run", {}, adaptation={"mode": "lora"})


def test_the_options_are_frozen_on_the_plan_as_the_base_fills_them(tmp_path: Path) -> None:
    work = task_dir(tmp_path, "plan", {"hyperparameters": {"zero_stage": 2}})
    hp = frozen(work)
    assert {k: hp[k] for k in ("mixed_precision", "zero_stage", "zero_offload")} == {
        "mixed_precision": "fp32",
        "zero_stage": 2,
        "zero_offload": "none",
    }
    assert hp["gradient_checkpointing"] is False and hp["packing"] is False
    assert hp["lr_scheduler_type"] == "constant"


@pytest.mark.parametrize(
    "options",
    [
        {"zero_stage": 1},
        {"zero_stage": 2},
        {"zero_stage": 3},
        {"zero_stage": 2, "zero_offload": "cpu"},
    ],
    ids=["zero1", "zero2", "zero3", "zero2-offload"],
)
def test_every_zero_stage_trains_the_curve_of_zero_0(
    tmp_path: Path, zero0: list[dict[str, Any]], options: dict[str, Any]
) -> None:
    events = run(tmp_path, "zero", options)
    assert_same_curve(events, zero0)
    norms, want = series(events, "grad_norm"), series(zero0, "grad_norm")
    assert norms[1] == pytest.approx(want[1], rel=SAME)


def test_zero_3_across_two_processes_trains_the_curve_of_one(
    tmp_path: Path, zero0: list[dict[str, Any]]
) -> None:
    spec = {"hyperparameters": {**RECIPE, "zero_stage": 3}}
    lead = start(task_dir(tmp_path, "lead", spec, world=2), threads=1)
    assert lead.stdout is not None
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
    assert lead.returncode == 0 and events_of(join)
    assert_same_curve([json.loads(x) for x in [*lines, *rest.splitlines()] if x[:1] == "{"], zero0)


def test_gradient_checkpointing_trains_the_same_curve(
    tmp_path: Path, zero0: list[dict[str, Any]]
) -> None:
    assert_same_curve(run(tmp_path, "full", {"gradient_checkpointing": True}), zero0)


def test_gradient_checkpointing_trains_a_lora_the_same(
    tmp_path: Path, lora: list[dict[str, Any]]
) -> None:
    events = run(tmp_path, "lora", {"gradient_checkpointing": True}, adaptation={"mode": "lora"})
    assert_same_curve(events, lora)


def test_packing_keeps_each_examples_loss(tmp_path: Path) -> None:
    # The fixture's chats are 41–62 tokens: rows of 128 hold two or three of them.
    wide = {"max_seq_length": 128}
    unpacked = run(tmp_path, "unpacked", wide)
    packed = run(tmp_path, "packed", {**wide, "packing": True})
    assert_same_curve(packed, unpacked)
    assert series(packed, "truncated_examples") == {1: 0}


def test_the_examples_max_seq_length_cuts_are_counted(tmp_path: Path) -> None:
    events = run(tmp_path, "short", {"max_seq_length": 48})
    whole = task_dir(tmp_path, "whole", {"hyperparameters": {"max_seq_length": 2048}})
    train, held, _ = data.examples(Plan.load(whole / "task.json"))
    cut = sum(len(e.input_ids) > 48 for e in (*train, *held))
    assert 0 < cut < len(train) + len(held)
    assert series(events, "truncated_examples") == {1: cut}


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_schedule_warms_up_then_follows_transformers_formula(
    tmp_path: Path, schedule: str
) -> None:
    warmup, peak = 2, 1e-3
    events = run(
        tmp_path,
        schedule,
        {"lr_scheduler_type": schedule, "warmup_steps": warmup, "learning_rate": peak},
    )
    rates = series(events, "learning_rate")  # the rate the next step trains at

    def expected(done: int) -> float:
        if done < warmup:
            return peak * done / warmup
        left = (done - warmup) / (STEPS - warmup)
        return peak * (1 - left if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * left)))

    assert rates == pytest.approx({s: expected(s) for s in range(1, STEPS + 1)}, abs=1e-9)


def test_bf16_trains_on_a_cpu_close_to_fp32(tmp_path: Path) -> None:
    # Two short steps: bf16 runs many times slower than fp32 on this CPU.
    tiny = {"max_steps": 2, "max_seq_length": 32, "per_device_train_batch_size": 2}
    fp32 = series(run(tmp_path, "fp32", tiny), "loss")
    bf16 = series(run(tmp_path, "bf16", {**tiny, "mixed_precision": "bf16"}), "loss")
    assert sorted(bf16) == [1, 2]
    assert bf16[1] == pytest.approx(fp32[1], rel=2e-2)
