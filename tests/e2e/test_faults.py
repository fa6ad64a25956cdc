"""kill -9 of each part of the stack in the middle of a training job: every service, Envoy
and SeaweedFS come back where the others expect them and the job succeeds whole and charged
exactly what was metered, once; a killed executor loses its job within the lease, as it
must. On SQLite every part is killed; on PostgreSQL each service."""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from services.core.store import create_engine, normalise_url
from tests.conftest import PG_URL
from tests.support import StackProcess, alive, eventually, wait_for_job

TTL = 8
STEPS = 30
JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": {"max_steps": STEPS},
}
# Killed on both stores: the services, whose crash can leave a transaction half done.
WRITERS = ["jobs", "claims", "artifacts", "meter"]
# Killed on SQLite alone: they hold no database connection.
OTHERS = ["envoy", "seaweedfs"]
# The stack's stores; the same index is the same stack for every test of the module.
STORES = [
    "sqlite",
    pytest.param(
        "postgresql",
        marks=pytest.mark.skipif(not PG_URL, reason="TRAINYARD_TEST_DATABASE_URL is not set"),
    ),
]


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackProcess]:
    """The README's stack, with the real trainer, under an 8-second lease."""
    env = {"TRAINYARD_LEASE_TTL_SECONDS": str(TTL)}
    schema = ""
    if request.param == "postgresql":
        schema = f"ty_{secrets.token_hex(6)}"
        with create_engine(PG_URL).begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        base = normalise_url(PG_URL)
        sep = "&" if "?" in base else "?"
        env["TRAINYARD_DATABASE_URL"] = f"{base}{sep}options=-csearch_path%3D{schema}"
    running = StackProcess(tmp_path_factory.mktemp("faults") / "home", env=env).start()
    try:
        yield running
    finally:
        running.stop()
        if schema:
            with create_engine(PG_URL).begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


def training(client: httpx.Client) -> str:
    """A job created and seen a few steps into training."""
    job_id = client.post("/v1/train/jobs", json=JOB).json()["id"]
    wait_for_job(
        client,
        job_id,
        lambda j: (
            j["status"] in ("succeeded", "failed")
            or (j["status"] == "running" and j.get("progress", {}).get("step", 0) >= 3)
        ),
    )
    return job_id


def kill(stack: StackProcess, part: str) -> int:
    """kill -9 of the part's whole process group, as a crash of the machine's part."""
    pid = int(stack.info()["pids"][part])
    os.killpg(pid, signal.SIGKILL)
    return pid


def answer(client: httpx.Client, path: str) -> httpx.Response:
    """A read through a gateway that may be coming back: refused connections are waited
    out, since Envoy itself is one of the parts killed."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return client.get(path)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


@pytest.mark.parametrize("stack", STORES, indirect=True)
@pytest.mark.parametrize("part", WRITERS)
def test_a_job_survives_a_writer_killed_mid_training(stack: StackProcess, part: str) -> None:
    survives_a_kill(stack, part)


@pytest.mark.parametrize("stack", STORES[:1], indirect=True)
@pytest.mark.parametrize("part", OTHERS)
def test_a_job_survives_a_part_killed_mid_training(stack: StackProcess, part: str) -> None:
    survives_a_kill(stack, part)


def survives_a_kill(stack: StackProcess, part: str) -> None:
    client = stack.member_client()
    job_id = training(client)
    before = stack.info()
    killed = kill(stack, part)
    deadline = time.monotonic() + 300
    while True:
        job = answer(client, f"/v1/train/jobs/{job_id}").json()
        if job.get("status") in ("succeeded", "failed", "cancelled"):
            break
        assert time.monotonic() < deadline, f"job stuck in {job.get('status')}"
        time.sleep(0.5)
    assert (job["status"], job["failure_code"]) == ("succeeded", ""), job.get("failure_message")
    # The job can end as soon as the part serves again, before the supervisor's own health
    # check of it has returned and recorded it back.
    restarts = before["restarts"][part]
    after = eventually(stack.info, lambda info: info["restarts"][part] > restarts, part)
    assert not alive(killed) and after["pids"][part] != killed  # it came back
    log = stack.log_path.read_text()
    assert f"{part} exited (-9); restarting it" in log
    assert f"{part} restarted (pid {after['pids'][part]})" in log
    # Where the others expect it: the gateway's and the store's ports are as they were.
    for kept in ("gateway_port", "admin_port", "s3_endpoint"):
        assert after[kept] == before[kept], kept

    series = client.get(f"/v1/train/jobs/{job_id}/metrics").json()["series"]
    steps = [p["step"] for s in series if s["name"] == "loss" for p in s["points"]]
    assert steps == list(range(1, STEPS + 1))  # one loss point per planned step

    sha256 = job["result"]["sha256"]
    artifact = client.get(f"/v1/train/artifacts/{sha256}").json()
    body = httpx.get(artifact["url"], timeout=60)
    assert hashlib.sha256(body.raise_for_status().content).hexdigest() == sha256
    assert_charged_once(stack, client, job)


def assert_charged_once(stack: StackProcess, client: httpx.Client, job: dict) -> None:  # type: ignore[type-arg]
    """Money through the crash (HIP-1333 §10): each hold charged exactly the seconds the
    clock metered at the claim's rate, the ledger holding each charge once, nothing held."""
    engine = create_engine(stack.database_url)
    with engine.connect() as conn:
        holds = conn.execute(
            sa.text(
                "SELECT used_seconds, rate, charged_micro_cents, status FROM holds WHERE job_id = :j"
            ),
            {"j": job["id"]},
        ).all()
    engine.dispose()
    assert holds and all(h.status == "released" for h in holds)
    assert all(h.charged_micro_cents == h.used_seconds * h.rate // 3600 for h in holds)
    assert sum(h.used_seconds for h in holds) == job["timing"]["charged_device_seconds"] > 0
    cost = job["cost_micro_cents"]
    assert cost == sum(h.charged_micro_cents for h in holds)
    entries, token = [], ""
    while True:
        page = client.get("/v1/train/ledger", params={"page_size": 100, "page_token": token}).json()
        entries += page["entries"]
        if not (token := page.get("next_page_token")):
            break
    assert sum(-e["micro_cents"] for e in entries if e["kind"] == "compute") == cost
    wallet = client.get("/v1/train/wallet").json()
    assert wallet["balance_micro_cents"] == 1000 * 10**6 - cost and not wallet.get("holds")


@pytest.mark.parametrize("stack", STORES, indirect=True)
def test_a_killed_executor_loses_its_job_within_the_lease(stack: StackProcess) -> None:
    client = stack.member_client()
    job_id = training(client)
    kill(stack, "executor")
    killed = time.monotonic()
    lost = wait_for_job(client, job_id, lambda j: j["status"] in ("succeeded", "failed"))
    # The lease's TTL, plus one sweep (at most 2 s at this TTL), plus the poll above.
    assert time.monotonic() - killed < TTL + 2 + 2
    assert (lost["status"], lost["failure_code"], lost["failure_category"]) == (
        "failed",
        "executor_lost",
        "executor",
    )
