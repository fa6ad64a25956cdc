"""The executor's work area: what a task needs of its disk, what the work area has left
under a budget, and a task it cannot hold failing before anything of it is written."""

from __future__ import annotations

import shutil
from pathlib import Path

from executor.agent import disk
from executor.agent.runner import TaskRunner
from tests.support import make_local_model
from trainyard.artifact.v1.artifact_pb2 import Grant
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training import events
from trainyard.training.catalog import FIXTURE, local_base


def test_a_base_needs_its_weights_size() -> None:
    assert disk.base_bytes(FIXTURE) == FIXTURE.parameters * 4
    assert disk.base_bytes(None) == 0


def test_a_local_base_needs_its_weight_files(tmp_path: Path) -> None:
    base = local_base(make_local_model(tmp_path / "tiny-local"))
    assert base is not None
    weights = sum(p.stat().st_size for p in (tmp_path / "tiny-local").glob("*.safetensors"))
    assert disk.base_bytes(base) == weights > 0


def test_a_budget_counts_what_the_work_area_holds(tmp_path: Path) -> None:
    (tmp_path / "tsk_a").mkdir()
    (tmp_path / "tsk_a" / "model.bin").write_bytes(b"x" * 6000)
    assert disk.room(tmp_path, 10_000) == 4000
    assert disk.shortfall(tmp_path, 5000, 10_000) == 1000
    assert disk.shortfall(tmp_path, 4000, 10_000) == 0
    # A work area over its budget has no room at all.
    assert disk.room(tmp_path, 5000) == 0


def test_without_a_budget_the_disk_free_space_is_the_room(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    assert disk.shortfall(tmp_path, 1, 0) == 0
    assert disk.shortfall(tmp_path, free * 2, 0) >= free


def test_a_refused_task_fails_with_its_code_and_writes_nothing(tmp_path: Path) -> None:
    assignment = claim_service_pb2.Assignment(
        org="acme",
        task=task_pb2.Task(id="tsk_0123456789abcdef", lease="trl_x"),
        job=job_pb2.Job(id="job_0123456789abcdef", base_model="fixture-tiny-llm"),
    )
    task = TaskRunner(
        assignment, tmp_path, "executor.scripted", lambda *_: Grant(), refusal=disk.DISK_FULL
    )
    task.start()
    assert task.finished.wait(30)
    statuses = [(e.status, e.error) for e in task.unsent() if isinstance(e, events.Status)]
    assert statuses == [("failed", disk.DISK_FULL)]
    assert not task.work.exists()
