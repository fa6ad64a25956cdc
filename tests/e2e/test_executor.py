"""The executor wire with real processes: the stack as `trainyard up` runs it, its local
executor, and crashes — of the executor and of ClaimService — in the middle of a task."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from services.core.store import open_store
from services.core.tables import EventRow, MetricRow
from tests.support import StackProcess, alive, bearer, wait_for_job

ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")
JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}


@pytest.fixture(scope="module")
def slow_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """A stack whose leases lapse in 8 s (a service restart takes ~4) and whose trainer takes
    0.15 s a step."""
    home = tmp_path_factory.mktemp("slow") / "home"
    running = StackProcess(
        home,
        env={
            "TRAINYARD_LEASE_TTL_SECONDS": "8",
            "TRAINYARD_REPORT_INTERVAL_SECONDS": "1",
            "SCRIPTED_STEP_SECONDS": "0.15",
            "TRAINYARD_TRAINER": "executor.scripted",
            "TRAINYARD_EXECUTOR_JOURNAL": str(home.parent / "journal.jsonl"),
        },
    ).start()
    try:
        yield running
    finally:
        running.stop()


def test_a_job_runs_on_the_local_executor_to_success(slow_stack: StackProcess) -> None:
    client = httpx.Client(
        base_url=slow_stack.url, headers=bearer(slow_stack.create_key("acme")), timeout=30
    )
    job = client.post("/v1/train/jobs", json={**JOB, "hyperparameters": {"max_steps": 8}}).json()
    done = wait_for_job(client, job["id"], lambda j: j["status"] in ("succeeded", "failed"))
    assert done["status"] == "succeeded" and done["model_available"] is True
    assert done["progress"]["step"] == 8 and done["outcome"]["stop_reason"] == "max_steps"
    attempts = client.get(f"/v1/train/jobs/{job['id']}/attempts").json()["attempts"]
    assert [a["status"] for a in attempts] == ["succeeded"]
    artifacts = client.get(f"/v1/train/jobs/{job['id']}/artifacts").json()["artifacts"]
    (output,) = [a for a in artifacts if a["sha256"] == done["result"]["sha256"]]
    assert output["provenance_record_id"] == done["result"]["provenance_record_id"]
    assert isinstance(output["expires"], int)  # Unix seconds, a JSON number
    # The job's read carries its output's size and lists what it holds, without URLs.
    assert done["result"]["size"] == output["size"] > 0 and isinstance(output["size"], int)
    held = {a["sha256"]: a for a in done["artifacts"]}
    assert held[output["sha256"]] == {
        "sha256": output["sha256"], "kind": output["kind"], "name": output["name"],
        "size": output["size"],
    }  # fmt: skip
    assert {a["sha256"] for a in artifacts} == set(held)
    # The rows it trained on are an object it holds, so a retry reads them again.
    assert {a["kind"] for a in artifacts} >= {"snapshot"}


def test_killing_the_executor_loses_its_job_within_the_lease(slow_stack: StackProcess) -> None:
    client = httpx.Client(
        base_url=slow_stack.url, headers=bearer(slow_stack.create_key("acme")), timeout=30
    )
    job = client.post("/v1/train/jobs", json=JOB).json()
    wait_for_job(
        client,
        job["id"],
        lambda j: j["status"] == "running" and j.get("progress", {}).get("step", 0) >= 2,
    )
    os.kill(slow_stack.info()["pids"]["executor"], signal.SIGKILL)
    killed = time.monotonic()
    lost = wait_for_job(client, job["id"], lambda j: j["status"] == "failed", timeout=30)
    # TTL 8 s, plus one sweep (≤2 s), plus the poll above.
    assert time.monotonic() - killed < 8 + 2 + 2
    assert (lost["failure_code"], lost["failure_category"]) == ("executor_lost", "executor")


def test_killing_claim_service_mid_task_loses_no_acknowledged_event(
    slow_stack: StackProcess,
) -> None:
    client = httpx.Client(
        base_url=slow_stack.url, headers=bearer(slow_stack.create_key("acme")), timeout=30
    )
    job = client.post("/v1/train/jobs", json={**JOB, "hyperparameters": {"max_steps": 40}}).json()
    wait_for_job(
        client,
        job["id"],
        lambda j: j["status"] == "running" and j.get("progress", {}).get("step", 0) >= 5,
    )
    before = slow_stack.info()["pids"]["claims"]
    os.kill(before, signal.SIGKILL)
    done = wait_for_job(
        client, job["id"], lambda j: j["status"] in ("succeeded", "failed"), timeout=120
    )
    assert slow_stack.info()["pids"]["claims"] != before and not alive(before)
    assert (done["status"], done["failure_code"]) == ("succeeded", "")
    assert done["progress"]["step"] == 40

    journal = [
        json.loads(line)
        for line in Path(slow_stack.env["TRAINYARD_EXECUTOR_JOURNAL"]).read_text().splitlines()
    ]
    task = next(
        r["task"]
        for r in journal
        if r["what"] == "sent" and any(e[2] == "loss" and e[3] == 40 for e in r["events"])
    )
    sent = {
        (e[2], e[3])
        for r in journal
        if r["task"] == task and r["what"] == "sent"
        for e in r["events"]
        if e[1] == "metric"
    }
    acked = max(r["seq"] for r in journal if r["task"] == task and r["what"] == "acked")
    acked_metrics = {
        (e[2], e[3]) for r in journal if r["task"] == task and r["what"] == "sent" for e in r["events"]
        if e[1] == "metric" and e[0] <= acked
    }  # fmt: skip
    store = open_store(slow_stack.database_url, run_migrations=False)
    with store.unit(write=False) as session:
        stored = {
            (m.name, m.step)
            for m in session.scalars(sa.select(MetricRow).where(MetricRow.job_id == job["id"]))
        }
        events = session.scalars(
            sa.select(EventRow).where(EventRow.job_id == job["id"], EventRow.type == "metric")
        ).all()
        recorded = [(e.data["name"], e.data["step"]) for e in events]
    store.dispose()
    assert acked_metrics - stored == set()  # nothing acknowledged was lost
    assert stored - sent == set()  # nothing was stored that was not sent
    assert len(recorded) == len(set(recorded))  # and every event is there exactly once


def test_an_executor_restarted_after_a_kill_ends_the_job_it_held_at_once(
    tmp_path: Path,
) -> None:
    """The deployment's lease is ten minutes; the executor the supervisor starts again says
    in its hello which task its killed process held, so the job fails `executor_lost` as
    soon as it connects, not when the lease lapses. (A stack of its own: the killed task's
    work directory stays the while a failed task's does, which no other test should find.)"""
    stack = StackProcess(tmp_path / "home").start()
    try:
        restarted_ends_at_once(stack)
    finally:
        stack.stop()


def restarted_ends_at_once(stack: StackProcess) -> None:
    client = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key("acme")), timeout=30)
    body = {**JOB, "hyperparameters": {"max_steps": 100}}
    job = client.post("/v1/train/jobs", json=body).json()
    wait_for_job(
        client,
        job["id"],
        lambda j: j["status"] == "running" and j.get("progress", {}).get("step", 0) >= 2,
    )
    before = stack.info()["pids"]["executor"]
    os.kill(before, signal.SIGKILL)
    lost = wait_for_job(client, job["id"], lambda j: j["status"] == "failed", timeout=120)
    assert (lost["failure_code"], lost["failure_category"]) == ("executor_lost", "executor")
    assert lost["progress"]["step"] < 100
    # The executor started again trains the next job.
    again = client.post("/v1/train/jobs", json={**JOB, "hyperparameters": {"max_steps": 2}})
    done = wait_for_job(client, again.json()["id"], lambda j: j["status"] in ENDED)
    assert done["status"] == "succeeded", done
    client.close()
