"""The edges of what metrics count: the code and reason a call ended with, a method's
name split for labels, the report lag of events acknowledged once, and the port the
supervisor names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from executor.agent.runner import TaskRunner
from services.core import errors
from services.core.config import Config, ConfigError
from services.core.metrics import outcome, split_method
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training import events


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (None, ("OK", "")),
        (errors.ValidationError("name"), ("INVALID_ARGUMENT", "INVALID_REQUEST")),
        (errors.NotFound(), ("NOT_FOUND", "NOT_FOUND")),
        (errors.Conflict(), ("ABORTED", "CONFLICT")),
        (
            errors.DomainError(reason="LEASE_LOST", code=grpc.StatusCode.ABORTED),
            ("ABORTED", "LEASE_LOST"),
        ),
        (NotImplementedError(), ("UNIMPLEMENTED", "UNIMPLEMENTED")),
        (asyncio.CancelledError(), ("CANCELLED", "")),
        (RuntimeError("a bug"), ("INTERNAL", "INTERNAL_ERROR")),
    ],
)
def test_a_call_is_counted_by_the_code_and_reason_it_answered(
    exc: BaseException | None, expected: tuple[str, str]
) -> None:
    assert outcome(exc) == expected


def test_a_method_splits_into_its_service_and_name() -> None:
    assert split_method("/trainyard.job.v1.JobService/CreateJob") == (
        "trainyard.job.v1.JobService",
        "CreateJob",
    )


def test_report_lag_is_observed_once_per_event_committed(tmp_path: Path) -> None:
    assignment = claim_service_pb2.Assignment(
        task=task_pb2.Task(id="tsk_0123456789abcdef"), job=job_pb2.Job(id="job_0123456789abcdef")
    )
    runner = TaskRunner(assignment, tmp_path, "executor.scripted", lambda *_: None)  # type: ignore[arg-type,return-value]
    for step in (1, 2, 3):
        runner._add(events.Metric("loss", step, 1.0))
    first = runner.acknowledge(2)
    assert len(first) == 2 and all(waited >= 0 for waited in first)
    assert runner.acknowledge(2) == []  # a repeated acknowledgement
    assert runner.acknowledge(1) == []  # an older one, arriving late
    assert len(runner.acknowledge(3)) == 1


def test_the_metrics_port_is_read_when_named_and_checked() -> None:
    assert Config.from_env({}).metrics_port is None
    assert Config.from_env({"TRAINYARD_METRICS_PORT": "0"}).metrics_port == 0
    assert Config.from_env({"TRAINYARD_METRICS_PORT": "9464"}).metrics_port == 9464
    with pytest.raises(ConfigError):
        Config.from_env({"TRAINYARD_METRICS_PORT": "70000"})
