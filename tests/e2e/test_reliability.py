"""What a user meets in normal use when a job repeats, a lease is short, an output cannot
be stored, a job is cancelled while its executor starts it, its output is deleted or
expires, or it is retried: each on a real stack, driven over REST through the gateway."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from services.core.object_tables import ObjectRow
from services.core.store import open_store
from tests.support import StackProcess, reason, wait_for_job

FIXTURE = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}
ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")
GiB = 1024**3


def ended(job: dict) -> bool:  # type: ignore[type-arg]
    return job["status"] in ENDED


def loss_steps(client: httpx.Client, job_id: str) -> list[int]:
    series = client.get(f"/v1/train/jobs/{job_id}/metrics").json()["series"]
    return [p["step"] for s in series if s["name"] == "loss" for p in s["points"]]


@pytest.fixture(scope="module")
def short_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """The real trainer under a 6-second lease: shorter than the 20-second report
    interval the configuration names, and than a trainer's cold start."""
    home = tmp_path_factory.mktemp("short") / "home"
    running = StackProcess(home, env={"TRAINYARD_LEASE_TTL_SECONDS": "6"}).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def scripted_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """A scripted trainer that takes 4 s to start, as a cold trainer does, then 0.1 s a
    step."""
    home = tmp_path_factory.mktemp("scripted") / "home"
    running = StackProcess(
        home,
        env={
            "TRAINYARD_TRAINER": "executor.scripted",
            "SCRIPTED_START_SECONDS": "4",
            "SCRIPTED_STEP_SECONDS": "0.1",
        },
    ).start()
    try:
        yield running
    finally:
        running.stop()


# -- a short lease, and the same job three times ------------------------------------------


def test_a_cold_start_under_a_short_lease_keeps_its_task(short_stack: StackProcess) -> None:
    client = short_stack.member_client()
    job = client.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"max_steps": 8}})
    done = wait_for_job(client, job.json()["id"], ended)
    assert (done["status"], done["failure_code"]) == ("succeeded", "")
    assert loss_steps(client, done["id"]) == list(range(1, 9))


def test_a_lease_shorter_than_three_reports_is_refused_at_start(tmp_path: Path) -> None:
    refused = StackProcess(tmp_path / "home", env={"TRAINYARD_LEASE_TTL_SECONDS": "2"})
    with pytest.raises(RuntimeError) as failure:
        refused.start(timeout=30)
    assert "TRAINYARD_LEASE_TTL_SECONDS must be at least 3" in str(failure.value)


def test_the_same_job_three_times_succeeds_and_shares_what_is_identical(
    short_stack: StackProcess,
) -> None:
    """Training is deterministic: the second and third runs make the same saved state as
    the first, which the org already holds, so they link it instead of failing."""
    client = short_stack.member_client()
    body = {**FIXTURE, "hyperparameters": {"max_steps": 10}}
    ids = [client.post("/v1/train/jobs", json=body).json()["id"] for _ in range(3)]
    jobs = [wait_for_job(client, job_id, ended) for job_id in ids]
    assert [(j["status"], j["failure_code"]) for j in jobs] == [("succeeded", "")] * 3
    assert all(loss_steps(client, j["id"]) == list(range(1, 11)) for j in jobs)
    states = {j["result"]["checkpoint_sha256"] for j in jobs}
    assert len(states) == 1 and "" not in states
    (state,) = states
    for job in jobs:
        listed = client.get(f"/v1/train/jobs/{job['id']}/artifacts").json()["artifacts"]
        assert {a["sha256"] for a in listed} >= {state, job["result"]["sha256"]}
    objects = client.get("/v1/train/artifacts").json()["artifacts"]
    assert [o["sha256"] for o in objects].count(state) == 1  # stored once, held by three

    # Deleting one job's output takes the objects only it made; the shared state and
    # snapshot are kept, saying why, until the last job holding them loses its output.
    first, second, third = jobs
    snapshot = first["preparation"]["snapshot_sha256"]
    answer = client.delete(f"/v1/train/jobs/{first['id']}/artifacts/{first['result']['sha256']}")
    assert answer.status_code == 200 and answer.json()["deleted"] is True
    assert {(c["sha256"], c["kept"]) for c in answer.json()["cascaded"]} == {
        (state, "held_by_another_job"),
        (snapshot, "held_by_another_job"),
    }
    client.delete(f"/v1/train/jobs/{second['id']}/artifacts/{second['result']['sha256']}")
    last = client.delete(f"/v1/train/artifacts/{third['result']['sha256']}").json()
    assert {(c["sha256"], c["kind"], c["kept"]) for c in last["cascaded"]} == {
        (state, "checkpoint", ""),
        (snapshot, "snapshot", ""),
    }
    for gone in (state, snapshot, third["result"]["sha256"]):
        assert client.get(f"/v1/train/artifacts/{gone}").status_code == 404
    # Deleting again is a no-op, as the contract says, not a 404.
    again = client.delete(f"/v1/train/artifacts/{third['result']['sha256']}")
    assert (again.status_code, again.json()["deleted"], again.json()["cascaded"]) == (200, True, [])
    unknown = client.delete(f"/v1/train/artifacts/{secrets.token_hex(32)}")
    assert unknown.status_code == 404


# -- expiry, retry, and a retry after the source is gone ----------------------------------


def test_an_expired_output_reads_as_gone_before_the_sweep(short_stack: StackProcess) -> None:
    client = short_stack.member_client()
    created = client.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"max_steps": 4}})
    job = wait_for_job(client, created.json()["id"], ended)
    assert job["model_available"] is True and job["result"]["sha256"]
    db = open_store(short_stack.database_url, run_migrations=False)
    with db.unit() as session:
        session.execute(
            sa.update(ObjectRow)
            .where(ObjectRow.sha256 == job["result"]["sha256"])
            .values(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
        )
    db.dispose()
    read = client.get(f"/v1/train/jobs/{job['id']}").json()
    (listed,) = [j for j in client.get("/v1/train/jobs").json()["jobs"] if j["id"] == job["id"]]
    for seen in (read, listed):
        assert seen["model_available"] is False and not seen.get("result")
    names = [
        a["sha256"] for a in client.get(f"/v1/train/jobs/{job['id']}/artifacts").json()["artifacts"]
    ]
    assert job["result"]["sha256"] not in names


def test_a_retry_runs_the_snapshot_after_its_upload_is_deleted(short_stack: StackProcess) -> None:
    """002 "Retry explícito": a retry re-runs the same data, even when the rows it was
    made from are gone; and only a failed or cancelled job may be retried."""
    client = short_stack.member_client()
    rows = b"".join(
        json.dumps({"messages": [{"role": "user", "content": f"say {w}"},
                                 {"role": "assistant", "content": w}]}).encode() + b"\n"
        for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
    )  # fmt: skip
    sha256 = hashlib.sha256(rows).hexdigest()
    grant = client.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows", "sha256": sha256, "size": len(rows)},
    ).json()
    httpx.put(
        grant["upload"]["url"], content=rows, headers=grant["upload"]["headers"]
    ).raise_for_status()
    assert client.post(f"/v1/train/artifacts/{sha256}/confirm").status_code == 200
    body = {"base_model": "fixture-tiny-llm", "dataset": {"uri": f"artifact:{sha256}"},
            "hyperparameters": {"max_steps": 6}, "resources": {"budget": 100}}  # fmt: skip
    job = wait_for_job(client, client.post("/v1/train/jobs", json=body).json()["id"], ended)
    assert job["status"] == "succeeded"
    refused = client.post(f"/v1/train/jobs/{job['id']}/retry", headers={"Idempotency-Key": "again"})
    assert refused.status_code == 409 and reason(refused) == "invalid_transition"

    cancelled = client.post("/v1/train/jobs", json={**body, "hyperparameters": {"max_steps": 40}})
    cancelled_id = cancelled.json()["id"]
    wait_for_job(client, cancelled_id, lambda j: j["status"] == "running" or ended(j))
    client.post(f"/v1/train/jobs/{cancelled_id}/cancel")
    assert wait_for_job(client, cancelled_id, ended)["status"] == "cancelled"
    assert client.delete(f"/v1/train/artifacts/{sha256}").status_code == 200
    retried = client.post(
        f"/v1/train/jobs/{cancelled_id}/retry", headers={"Idempotency-Key": "after-delete"}
    )
    assert retried.status_code == 200, retried.text
    done = wait_for_job(client, cancelled_id, lambda j: ended(j) and j["attempt_count"] == 2)
    assert (done["status"], done["failure_code"]) == ("succeeded", "")
    assert done["preparation"]["snapshot_sha256"] == job["preparation"]["snapshot_sha256"]
    assert loss_steps(client, cancelled_id)[-1] == 40


# -- a cancel while the executor starts the task; an output the org cannot hold ----------


def test_a_cancel_while_preparing_reaches_the_executor(scripted_stack: StackProcess) -> None:
    client = scripted_stack.member_client()
    job = client.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"max_steps": 30}})
    job_id = job.json()["id"]
    leased = wait_for_job(
        client,
        job_id,
        lambda j: (
            client.get(f"/v1/train/jobs/{j['id']}/attempts").json()["attempts"][-1]["status"]
            in ("leased", "accepted")
        ),
    )
    assert leased["status"] == "preparing"  # its trainer is still starting
    answer = client.post(f"/v1/train/jobs/{job_id}/cancel").json()
    assert answer["status"] == "cancelling"  # not cancelled until the executor stops it
    done = wait_for_job(client, job_id, ended)
    assert (done["status"], done["model_available"]) == ("cancelled", False)
    (attempt,) = client.get(f"/v1/train/jobs/{job_id}/attempts").json()["attempts"]
    assert attempt["status"] == "cancelled"
    # Only training is charged (`002_…`): an attempt the cancel stopped before its loop
    # began costs nothing; one whose trainer had begun (its `started_time`) costs its
    # seconds from then, however few. Which of the two the cancel meets is the executor's.
    metered = done["timing"]["metered_device_seconds"]
    if attempt.get("started_time") is None:
        assert float(done["cost_credits"]) == 0 and metered == 0
    else:
        assert metered >= 1 and float(done["cost_credits"]) > 0
    events = client.get(f"/v1/train/jobs/{job_id}/events").json()["events"]
    moves = [e["status"] for e in events if e["type"] == "transition"]
    assert moves[-2:] == ["cancelling", "cancelled"]
    # The executor stopped the trainer before its first step.
    assert not loss_steps(client, job_id)


def test_an_output_the_org_cannot_hold_fails_the_job_at_once(scripted_stack: StackProcess) -> None:
    """The org holds the most granted, unconfirmed bytes it may: the run's output cannot
    be granted, and the job fails with a reason the user can act on, not a lost lease."""
    client = scripted_stack.member_client()
    # A first run stores the snapshot, which the second shares: only its output is new.
    first = client.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"max_steps": 5}})
    assert wait_for_job(client, first.json()["id"], ended)["status"] == "succeeded"
    for _ in range(2):
        grant = client.post(
            "/v1/train/artifacts",
            json={
                "kind": "dataset",
                "name": "big",
                "sha256": secrets.token_hex(32),
                "size": 64 * GiB,
            },
        )
        assert grant.status_code == 200
    job = client.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"max_steps": 5}})
    done = wait_for_job(client, job.json()["id"], ended, timeout=120)
    assert (done["status"], done["failure_code"], done["failure_category"]) == (
        "failed",
        "artifact_pending_limit",
        "limit",
    )
    assert "unconfirmed upload bytes" in done["failure_message"]
