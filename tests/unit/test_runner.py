"""The runner's transfers: what it retries while its lease holds, and what fails the task
with a code the user can act on. The services are fakes here: pure logic only."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_status import rpc_status

from executor.agent.failures import LeaseLost, TaskFailed, classify
from executor.agent.runner import TaskRunner
from services.core import errors
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2


class Refusal(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A refusal as a gRPC client receives it: a status with its ErrorInfo."""

    def __init__(self, error: errors.DomainError) -> None:
        self._status = rpc_status.to_status(error.to_status())

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self):  # type: ignore[no-untyped-def]
        return self._status.trailing_metadata

    def initial_metadata(self):  # type: ignore[no-untyped-def]
        return ()


UNAVAILABLE = Refusal(errors.Unavailable())
LEASE_LOST = Refusal(errors.DomainError("lost", reason="LEASE_LOST", code=errors.Conflict.code))
PENDING = Refusal(errors.ResourceExhausted("full", reason="PENDING_LIMIT"))
INVALID = Refusal(errors.ValidationError("name", "bad"))


def answered(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("PUT", "http://store.invalid/o")
    return httpx.HTTPStatusError("refused", request=request, response=httpx.Response(status))


@pytest.mark.parametrize(
    ("failure", "verdict"),
    [
        (UNAVAILABLE, None),
        (PENDING, "artifact_pending_limit"),
        (INVALID, ""),
        (answered(503), None),
        (answered(403), None),  # a lapsed grant: a new registration signs anew
        (answered(400), ""),
        (httpx.ConnectError("refused"), None),
        (ValueError("a bug"), "executor_failed"),
    ],
)
def test_what_may_pass_is_retried_and_what_stands_is_not(
    failure: BaseException, verdict: str | None
) -> None:
    assert classify(failure) == verdict


def test_a_lost_lease_stops_the_task() -> None:
    with pytest.raises(LeaseLost):
        classify(LEASE_LOST)


def runner(tmp_path: Path, register, patience: float = 30.0, wake=lambda: None) -> TaskRunner:  # type: ignore[no-untyped-def]
    assignment = claim_service_pb2.Assignment(
        org="acme",
        task=task_pb2.Task(id="tsk_0123456789abcdef", lease="trl_x"),
        job=job_pb2.Job(id="job_0123456789abcdef"),
    )
    made = TaskRunner(
        assignment, tmp_path, "executor.scripted", register, patience=patience, wake=wake
    )
    made.work.mkdir(parents=True)
    return made


def output(tmp_path: Path) -> Path:
    directory = tmp_path / "out"
    directory.mkdir()
    (directory / "weights.txt").write_text("trained\n")
    return directory


def test_an_upload_goes_on_through_a_store_that_does_not_answer(tmp_path: Path) -> None:
    failures = [UNAVAILABLE, httpx.ConnectError("down")]

    def register(*_: object) -> artifact_pb2.Grant:
        if failures:
            raise failures.pop(0)
        return artifact_pb2.Grant(stored=True)  # the org holds the bytes already

    task = runner(tmp_path, register)
    sha256 = task._upload(output(tmp_path), "checkpoint", "model", 3)
    assert not failures
    assert [(e.type, e.sha256) for e in task.unsent()] == [("artifact", sha256)]


@pytest.mark.parametrize(
    ("failure", "code"),
    [(INVALID, "artifact_upload_failed"), (PENDING, "artifact_pending_limit")],
)
def test_a_refusal_that_stands_fails_the_task_with_its_code(
    tmp_path: Path, failure: BaseException, code: str
) -> None:
    def register(*_: object) -> artifact_pb2.Grant:
        raise failure

    with pytest.raises(TaskFailed) as failed:
        runner(tmp_path, register)._upload(output(tmp_path), "checkpoint", "model", 3)
    assert failed.value.code == code


def test_a_store_down_past_the_patience_fails_the_task(tmp_path: Path) -> None:
    def register(*_: object) -> artifact_pb2.Grant:
        raise UNAVAILABLE

    with pytest.raises(TaskFailed) as failed:
        runner(tmp_path, register, patience=0.1)._upload(output(tmp_path), "lora", "m", 1)
    assert failed.value.code == "artifact_upload_failed"


def test_a_trainer_stopped_by_a_cancel_before_it_could_answer_is_cancelled(
    tmp_path: Path,
) -> None:
    assignment = claim_service_pb2.Assignment(
        org="acme",
        task=task_pb2.Task(id="tsk_0123456789abcdef", lease="trl_x"),
        job=job_pb2.Job(id="job_0123456789abcdef"),
    )
    task = TaskRunner(assignment, tmp_path, "tests.unit.sleeping_trainer", lambda *_: None)
    task.start()
    deadline = time.monotonic() + 30
    while task._process is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # SIGTERM before the trainer set its handler ends it at once, saying nothing.
    task.cancel(grace=30)
    assert task.finished.wait(30)
    assert [(e.type, getattr(e, "status", "")) for e in task.unsent()] == [("status", "cancelled")]


def test_a_status_and_the_first_step_go_out_at_once_and_later_metrics_wait_for_their_batch(
    tmp_path: Path,
) -> None:
    woken: list[int] = []
    task = runner(
        tmp_path, lambda *_: artifact_pb2.Grant(), wake=lambda: woken.append(task.pending)
    )
    # The first step the trainer reports says it trains: its metrics go at once.
    task._handle('{"type": "metric", "name": "loss", "step": 1, "value": 2.5}\n')
    task._handle('{"type": "metric", "name": "grad_norm", "step": 1, "value": 0.5}\n')
    assert task.urgent and woken == [1, 2]
    assert [(e.name, e.step) for e in task.unsent()] == [("loss", 1), ("grad_norm", 1)]  # type: ignore[attr-defined]
    task._handle('{"type": "metric", "name": "loss", "step": 2, "value": 2.4}\n')
    assert task.pending == 1 and not task.urgent and woken == [1, 2]
    task._handle('{"type": "status", "status": "started"}\n')
    assert task.urgent and woken == [1, 2, 2]
    assert [e.type for e in task.unsent()] == ["metric", "status"]
    assert not task.urgent and task.pending == 0
