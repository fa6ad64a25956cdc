"""Decision jobs on `fixture-tiny-decider` run as the executor runs them: a subprocess
reading task.json (the job as a create admits it) and writing events. A readout learns
the queue the base does not know; a job that would damage what the base knows is
rejected by its budget unless projection keeps it off the protected directions; what
it writes loads back and answers as it was graded; a cancel resumes where it stopped."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from safetensors.torch import load_file

from executor.models import decider
from executor.trainers.decisions import grading
from executor.wire import protocol
from tests.integration.test_outputs import export_base, run_readme
from tests.integration.test_trainer import events_of, result, series, start, task_dir
from trainyard.training import decisions

DECIDER = {"base_model": "fixture-tiny-decider", "dataset": {"uri": decisions.FIXTURE_DATASET}}
KNOWN = list(decisions.KNOWN_SUITES)
QUEUE = {
    **DECIDER,
    "adaptation": {"mode": "readout"},
    "objective": {
        "terms": [
            {"kind": "hard_margin", "weight": 0.5, "margin": 0.5},
            {"kind": "pairwise_margin", "weight": 0.5},
            {"kind": "consistency", "weight": 0.5},
        ]
    },
    "evaluation": {"suites": ["sentiment"]},
    "hyperparameters": {"max_steps": 100, "save_steps": 10, "learning_rate": 0.1},
    "output": {"kind": "capability"},
}
# Steep enough to wreck the known suites through the shared head within a few dozen steps.
AGGRESSIVE = {
    **DECIDER,
    "adaptation": {"mode": "readout"},
    "hyperparameters": {"max_steps": 100, "save_steps": 20, "learning_rate": 0.5},
    "output": {"kind": "capability"},
}
BUDGET = {"accuracy": 0.02, "ece": 0.02}


def grades_of(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {g["suite"]: g for g in result(events)["evaluation"]["grades"]}


@pytest.fixture(scope="module")
def queue_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    work = task_dir(tmp_path_factory.mktemp("queue"), "run", QUEUE)
    return work, events_of(start(work, threads=1))


@pytest.fixture(scope="module")
def budget_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("budget")
    specs = {
        "unprotected": {**AGGRESSIVE, "protect": {"suites": KNOWN, "budget": BUDGET}},
        "projected": {
            **AGGRESSIVE,
            "protect": {"suites": KNOWN, "projection": {"strength": 1.0}, "budget": BUDGET},
        },
    }
    procs = {name: start(task_dir(tmp, name, spec), threads=1) for name, spec in specs.items()}
    runs = {name: events_of(proc) for name, proc in procs.items()}
    table = [
        "",
        "suite      role       base acc/ece    unprotected acc/ece   projected (λ=1) acc/ece",
    ]
    unprotected, projected = grades_of(runs["unprotected"]), grades_of(runs["projected"])
    for suite, g in unprotected.items():
        b, u, p = g["base"], g["trained"], projected[suite]["trained"]
        table.append(
            f"{suite:10s} {g['role']:10s} {b['accuracy']:.3f}/{b['ece']:.3f}     "
            f"{u['accuracy']:.3f}/{u['ece']:.3f}           {p['accuracy']:.3f}/{p['ece']:.3f}"
        )
    table.append(
        "verdict                                    "
        + f"{result(runs['unprotected'])['evaluation']['verdict']:22s}"
        + result(runs["projected"])["evaluation"]["verdict"]
    )
    print("\n".join(table))
    return runs


def test_a_readout_learns_the_question_the_base_does_not_know(
    queue_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, events = queue_run
    statuses = [e["status"] for e in events if e["type"] == "status"]
    assert statuses == ["accepted", "running", "evaluating", "finalizing"]
    assert sorted(series(events, "loss")) == list(range(1, 101))
    assert sorted(series(events, "eval_loss")) == list(range(10, 101, 10))
    grades = grades_of(events)
    queue = grades["queue"]
    assert [g["suite"] for g in result(events)["evaluation"]["grades"]] == ["queue", "sentiment"]
    assert queue["role"] == "target" and queue["examples"] == 74
    assert queue["base"]["accuracy"] < 0.6 and queue["trained"]["accuracy"] >= 0.9
    assert queue["trained"]["log_loss"] < queue["base"]["log_loss"]
    for figure in ("accuracy", "log_loss", "ece"):
        assert series(events, f"suite/queue/{figure}") == {
            100: pytest.approx(queue["trained"][figure], abs=1e-6)
        }
        assert series(events, f"base/queue/{figure}") == {
            100: pytest.approx(queue["base"][figure], abs=1e-6)
        }
    final = result(events)
    evaluation = final["evaluation"]
    assert evaluation["verdict"] == "accepted"  # nothing protected
    evals = series(events, "eval_loss")
    best = min(evals, key=lambda s: (evals[s], s))
    assert evaluation["best_step"] == best == final["served_step"]
    assert final["base_sha256"] == decider.BASE_SHA256
    assert final["outcome"] == {"stop_reason": "max_steps", "downgrades": []}
    # The event reads as the wire's Evaluation, grades and all.
    line = json.dumps(final)
    parsed = protocol.read(line)
    assert parsed.evaluation.grades[0].suite == "queue"  # type: ignore[union-attr]


def test_projection_keeps_an_aggressive_job_within_its_budget(
    budget_runs: dict[str, list[dict[str, Any]]],
) -> None:
    unprotected, projected = budget_runs["unprotected"], budget_runs["projected"]
    assert result(unprotected)["evaluation"]["verdict"] == "rejected"
    assert result(projected)["evaluation"]["verdict"] == "accepted"
    for events in (unprotected, projected):
        grades = grades_of(events)
        assert [g["role"] for g in grades.values()] == ["target", *["protected"] * 3]
        assert grades["queue"]["trained"]["accuracy"] >= 0.9  # both learn the queue
    hurt = grades_of(unprotected)
    assert any(not g["within_budget"] for g in hurt.values() if g["role"] == "protected")
    assert all(
        g["within_budget"] for g in grades_of(projected).values() if g["role"] == "protected"
    )
    # Each step reports the share of the gradient projection removed, per layer.
    shares = series(projected, "projection/head.weight")
    assert sorted(shares) == list(range(1, 101)) and all(0 < v < 1 for v in shares.values())
    assert not any(
        e["name"].startswith("projection/") for e in unprotected if e["type"] == "metric"
    )


def test_a_capability_reloads_and_answers_as_it_was_graded(
    queue_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    work, events = queue_run
    output = work / "output"
    assert {p.name for p in output.iterdir()} == {
        "capability.json",
        "delta.safetensors",
        "probe.json",
        "README.md",
    }
    manifest = json.loads((output / "capability.json").read_text())
    assert manifest["form"] == "delta" and manifest["serves"] == "head"
    assert manifest["question"]["labels"] == ["billing", "bug", "other"]
    assert manifest["temperature"] == 1.0 and manifest["base_sha256"] == decider.BASE_SHA256
    assert set(load_file(str(output / "delta.safetensors"))) == {"head.bias", "head.weight"}
    loaded = decider.load(output)
    probe = json.loads((output / "probe.json").read_text())
    assert loaded.answer(probe["states"]) == probe["answers"]
    graded = grades_of(events)["queue"]["trained"]
    regraded = grading.grade_model(loaded.model, decisions.split(decisions.fixture_rows())[1])
    assert regraded.to_json() == pytest.approx(graded, abs=1e-12)


def test_a_capability_s_readme_answers_as_graded_on_the_exported_base(
    queue_run: tuple[Path, list[dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = queue_run[0] / "output"
    readme = (output / "README.md").read_text()
    assert "fixture-tiny-decider" in readme and decider.BASE_SHA256 in readme
    base = tmp_path / "base"
    assert export_base("fixture-tiny-decider", base) == result(queue_run[1])["base_sha256"]
    printed = run_readme(output, base, tmp_path / "user", monkeypatch)
    assert json.loads(printed) == json.loads((output / "probe.json").read_text())["answers"]


def test_a_cancel_keeps_what_was_trained_and_a_resume_continues_it(
    tmp_path: Path, queue_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    _, uninterrupted = queue_run
    first = start(task_dir(tmp_path, "first", QUEUE), threads=1)
    assert first.stdout is not None
    for line in first.stdout:
        if '"name":"loss","step":5,' in line:
            first.send_signal(signal.SIGTERM)
            break
    stopped = result(events_of(first))
    assert stopped["outcome"]["stop_reason"] == "cancelled" and 5 <= stopped["step"] < 100
    assert (tmp_path / "first" / "output" / "capability.json").exists()

    second = task_dir(tmp_path, "second", QUEUE, resume_dir=str(tmp_path / "first" / "state"))
    resumed = events_of(start(second, threads=1))
    loss, before = series(resumed, "loss"), series(uninterrupted, "loss")
    assert min(loss) == stopped["step"] + 1 and max(loss) == 100
    for step, value in loss.items():  # the same run, continued
        assert value == pytest.approx(before[step], rel=1e-5, abs=1e-6)
    assert result(resumed)["served_step"] == result(uninterrupted)["served_step"]


def test_a_full_checkpoint_with_distillation_loads_back_whole(tmp_path: Path) -> None:
    spec = {
        **DECIDER,
        "adaptation": {"mode": "full"},
        "protect": {"suites": ["spam"], "distillation": True},
        "hyperparameters": {"max_steps": 20, "save_steps": 10, "learning_rate": 0.1},
        "output": {"kind": "checkpoint"},
    }
    work = task_dir(tmp_path, "full", spec)
    events = events_of(start(work, threads=1))
    output = work / "output"
    assert {p.name for p in output.iterdir()} == {"model.safetensors", "decider.json", "probe.json"}
    state = load_file(str(output / "model.safetensors"))
    base = decider.base_state()
    assert not all(state[k].equal(base[k]) for k in ("embed.weight", "fc1.weight"))  # all trained
    loaded = decider.load(output)
    probe = json.loads((output / "probe.json").read_text())
    assert loaded.answer(probe["states"]) == probe["answers"]
    spam = grades_of(events)["spam"]
    assert spam["role"] == "protected" and spam["within_budget"]  # no budget: nothing binds
