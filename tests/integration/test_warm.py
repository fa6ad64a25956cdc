"""A warm trainer: a process started ahead with its imports done, handed the next task.
Real processes throughout: the runner, `python -m executor.wire.warm`, and real trainers (the
scripted one, one that says where it runs, and the DeepSpeed fixture trainer)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from executor.agent.agent import Agent
from executor.agent.config import AgentConfig
from executor.agent.runner import TaskRunner
from executor.agent.workdir import trainer_env
from executor.wire.warm import WarmTrainer
from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training import events
from trainyard.training.catalog import Catalog
from trainyard.training.events import Event

SCRIPTED = "executor.scripted"
WHERE = "tests.integration.where_trainer"


def assignment(job: job_pb2.Job | None = None) -> claim_service_pb2.Assignment:
    return claim_service_pb2.Assignment(
        org="acme",
        task=task_pb2.Task(id="tsk_0123456789abcdef", lease="trl_x"),
        job=job or job_pb2.Job(id="job_0123456789abcdef", planned_steps=5),
    )


def stored(*_: object) -> artifact_pb2.Grant:
    return artifact_pb2.Grant(stored=True)  # the org holds the bytes: nothing is sent


def runner(
    root: Path,
    trainer: str,
    warm: WarmTrainer | None = None,
    job: job_pb2.Job | None = None,
    env: dict[str, str] | None = None,
) -> TaskRunner:
    return TaskRunner(assignment(job), root, trainer, stored, env=env, warm=warm)


def wait_for(condition: Callable[[], object], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def run(task: TaskRunner) -> list[Event]:
    task.start()
    assert task.finished.wait(600)
    return sent(task)


def sent(task: TaskRunner) -> list[Event]:
    made: list[Event] = []
    while batch := task.unsent():
        made += batch
    return made


def timeless(made: list[Event]) -> tuple[list[Event], str]:
    """The events with what differs from run to run taken out: the time trained, and where
    the trainer's log falls among the other events (its text is compared whole)."""
    kept = [
        dataclasses.replace(e, training_seconds=0.0) if isinstance(e, events.Result) else e
        for e in made
        if not isinstance(e, events.Stdio)
    ]
    text = "".join(e.text for e in made if isinstance(e, events.Stdio))
    return [dataclasses.replace(e, seq=0) for e in kept], text


@pytest.fixture
def warm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WarmTrainer]:
    """A started warm trainer for the test's trainer (`@pytest.mark.parametrize` on
    `trainer` indirectly, the scripted one by default)."""
    trainer = getattr(request, "param", SCRIPTED)
    root = tmp_path / "warm"
    made = WarmTrainer(trainer, root, {**trainer_env(root), "WARM_ONLY": "the warm process's"})
    made.start()
    try:
        yield made
    finally:
        made.close()


def test_a_task_handed_to_a_warm_trainer_reports_what_a_cold_start_does(
    tmp_path: Path, warm: WarmTrainer
) -> None:
    cold = run(runner(tmp_path / "cold", SCRIPTED))
    assert warm.waiting is not None
    ready = warm.waiting.pid
    task = runner(tmp_path / "warm", SCRIPTED, warm)
    handed = run(task)
    assert task._process is not None and task._process.pid == ready
    assert task._process.returncode == 0
    assert timeless(handed) == timeless(cold)
    assert [e.type for e in handed][-1] == "result"
    # The next task finds another process ready.
    wait_for(lambda: warm.waiting is not None)
    assert warm.waiting is not None and warm.waiting.pid != ready


@pytest.mark.parametrize("warm", [WHERE], indirect=True)
def test_a_warm_trainer_takes_the_tasks_environment_and_directory_and_logs_to_its_log(
    tmp_path: Path, warm: WarmTrainer
) -> None:
    root = tmp_path / "tasks"
    for start in (None, warm):
        task = runner(root, WHERE, start, env={"WARM_PROBE": "the task's"})
        made = run(task)
        (log,) = [e for e in made if isinstance(e, events.Log)]
        assert json.loads(log.line) == {
            "cwd": str(task.work),
            "argv": [str(task.work / "task.json")],
            "main": "__main__",
            "WARM_PROBE": "the task's",
            # The task's environment replaces the warm process's, as a cold start's would.
            "WARM_ONLY": None,
            "TORCH_EXTENSIONS_DIR": str(root / "torch_extensions"),
        }
        trainer_log = (task.work / "trainer.log").read_text()
        assert trainer_log == "where_trainer: a line on stderr\n"
        # The log is reported whole, as the attempt's log.
        assert timeless(made)[1] == trainer_log
    assert "a line on stderr" not in (tmp_path / "warm" / "warm.log").read_text()


def test_a_cancel_stops_a_warm_started_trainer_cooperatively(
    tmp_path: Path, warm: WarmTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRIPTED_STEP_SECONDS", "0.1")
    job = job_pb2.Job(id="job_0123456789abcdef", planned_steps=10_000)
    assert warm.waiting is not None
    ready = warm.waiting.pid
    task = runner(tmp_path / "tasks", SCRIPTED, warm, job=job)
    task.start()
    made: list[Event] = []

    def training() -> bool:
        made.extend(task.unsent())
        return any(e.type == "metric" for e in made)

    wait_for(training)
    assert task._process is not None and task._process.pid == ready
    task.cancel(grace=60)
    assert task.finished.wait(60)
    made += sent(task)
    (result,) = [e for e in made if isinstance(e, events.Result)]
    assert result.outcome is not None and result.outcome.stop_reason == "cancelled"
    assert 0 < result.step < 10_000
    assert task._process.wait() == 0


@pytest.mark.parametrize("warm", ["tests.unit.sleeping_trainer"], indirect=True)
def test_a_cancel_before_the_warm_trainer_answers_ends_it_cancelled(
    tmp_path: Path, warm: WarmTrainer
) -> None:
    task = runner(tmp_path / "tasks", "tests.unit.sleeping_trainer", warm)
    task.start()
    wait_for(lambda: task._process is not None)
    assert warm.waiting is None or task._process is not warm.waiting
    task.cancel(grace=60)
    assert task.finished.wait(60)
    assert [(e.type, getattr(e, "status", "")) for e in sent(task)] == [("status", "cancelled")]


@pytest.mark.parametrize("trainer", ["executor.train", SCRIPTED])
def test_a_warm_trainer_whose_stdin_closes_exits(tmp_path: Path, trainer: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "executor.wire.warm", trainer], cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, _ = process.communicate(input="", timeout=120)
    assert (process.returncode, out) == (0, "")


def test_a_ready_warm_trainer_whose_stdin_closes_exits(tmp_path: Path, warm: WarmTrainer) -> None:
    waiting = warm.waiting
    assert waiting is not None and waiting.stdin is not None
    wait_for(lambda: " ready " in (tmp_path / "warm" / "warm.log").read_text())
    waiting.stdin.close()  # as when the executor goes away
    assert waiting.wait(timeout=60) == 0


def test_a_warm_trainer_that_died_is_passed_over_for_a_cold_start(
    tmp_path: Path, warm: WarmTrainer
) -> None:
    cold = run(runner(tmp_path / "cold", SCRIPTED))
    dead = warm.waiting
    assert dead is not None
    dead.kill()
    dead.wait()
    task = runner(tmp_path / "tasks", SCRIPTED, warm)
    handed = run(task)
    assert task._process is not None and task._process.pid != dead.pid
    assert timeless(handed) == timeless(cold)
    wait_for(lambda: warm.waiting is not None)  # and a live one is made ready again
    assert warm.waiting is not None and warm.waiting.poll() is None


@pytest.mark.parametrize("warm", [WHERE], indirect=True)
def test_a_task_that_sets_what_python_reads_at_start_starts_cold(
    tmp_path: Path, warm: WarmTrainer
) -> None:
    waiting = warm.waiting
    assert waiting is not None
    task = runner(tmp_path / "tasks", WHERE, warm, env={"PYTHONHASHSEED": "7"})
    assert [e.type for e in run(task) if e.type != "stdio"] == ["status", "log", "result"]
    assert task._process is not None and task._process.pid != waiting.pid
    assert warm.waiting is waiting and waiting.poll() is None  # still there for the next


def test_the_agent_hands_its_warm_trainer_to_a_task_and_ends_the_next_when_it_stops(
    tmp_path: Path,
) -> None:
    config = AgentConfig(
        url="http://127.0.0.1:9", api_key="k", machine="m", trainer=WHERE,
        work_root=tmp_path / "agent",
    )  # fmt: skip
    agent = Agent(config)
    try:
        agent.warm.start()
        assert agent.warm.waiting is not None
        ready = agent.warm.waiting.pid
        agent._dispatch(claim_service_pb2.ConnectResponse(assignment=assignment()))
        task = agent.runners["tsk_0123456789abcdef"]
        assert task.finished.wait(120)
        assert task._process is not None and task._process.pid == ready
        # The trainer's stderr line is reported, as the attempt's log, before its result.
        types = [e.type for e in sent(task)]
        assert [t for t in types if t != "stdio"] == ["status", "log", "result"]
        assert types.index("stdio") < types.index("result")
        wait_for(lambda: agent.warm.waiting is not None)
        following = agent.warm.waiting
        assert following is not None and following.pid != ready
        agent.stop(drain_seconds=1)
        assert following.poll() is not None  # stopping ended it
    finally:
        agent._channel.close()


def fixture_job(steps: int) -> job_pb2.Job:
    service = JobCreation(None, Catalog(), Config.from_env({}), None)  # type: ignore[arg-type]
    body = {
        "base_model": "fixture-tiny-llm",
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "resources": {"budget": 100},
        "hyperparameters": {"max_steps": steps, "save_steps": steps},
    }
    job = service.admit(Principal("k", "acme", "member"), parse_json_job(body)).job
    job.id = "job_0123456789abcdef"
    return job


def losses(made: list[Event]) -> dict[int, float]:
    return {e.step: e.value for e in made if isinstance(e, events.Metric) and e.name == "loss"}


@pytest.mark.parametrize("warm", ["executor.train"], indirect=True)
def test_the_deepspeed_trainer_trains_the_same_when_started_warm(
    tmp_path: Path, warm: WarmTrainer
) -> None:
    job = fixture_job(steps=2)
    cold = run(runner(tmp_path / "cold", "executor.train", job=job))
    task = runner(tmp_path / "warm-task", "executor.train", warm, job=job)
    handed = run(task)
    assert task._process is not None and task._process.returncode == 0
    assert len(losses(cold)) == 2
    assert losses(handed) == losses(cold)
    assert results(handed) == results(cold)


def results(made: list[Event]) -> list[Event]:
    return [e for e in timeless(made) if isinstance(e, events.Result)]


def test_a_crashed_trainers_output_is_reported_whole_before_its_failure(tmp_path: Path) -> None:
    env = {"SCRIPTED_CRASH_AT_STEP": "2", "SCRIPTED_STEP_SECONDS": "0"}
    made = run(runner(tmp_path, SCRIPTED, env=env))
    assert made[-1] == events.Status("failed", "trainer_failed", seq=len(made))
    text = "".join(e.text for e in made if isinstance(e, events.Stdio))
    assert text.startswith("step 1/5 loss ") and "\nTraceback (most recent call last):\n" in text
    assert text.endswith("RuntimeError: scripted crash at step 2\n")
    assert text == (tmp_path / "tsk_0123456789abcdef" / "trainer.log").read_text()
