"""The stack's supervisor as a user meets it: a rolling restart of every service while a
job trains, a part that keeps exiting stops the stack with a line that names it; and the
gateway keeps an idle executor's stream. (A part killed mid-job: `test_faults`.)"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from services.claims.store import ExecutorRow
from services.core.store import head_revision, open_store
from tests.support import StackProcess, alive, bearer, reason, wait_for_job

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": {"max_steps": 12},
}
# On a machine no executor serves: the job waits, and its event stream stays quiet.
PARKED = {**JOB, "resources": {"machines": ["nowhere"]}}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    running = StackProcess(tmp_path_factory.mktemp("supervised") / "home").start()
    try:
        yield running
    finally:
        running.stop()


def kill_group(pid: int) -> None:
    """kill -9 of a part and of whatever it started, as a crash would end them."""
    os.killpg(pid, signal.SIGKILL)


def restarted(stack: StackProcess, name: str, old: int, timeout: float = 90) -> int | None:
    """The pid `stack.json` names for `name` once the supervisor has started it again and
    it passed its health check (the file is rewritten only then); None once the stack has
    ended instead."""
    assert stack.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.proc.poll() is not None:
            return None
        try:
            pid = int(stack.info()["pids"][name])
        except FileNotFoundError:  # the stack is stopping: it removes the file first
            pid = old
        if pid != old:
            return pid
        time.sleep(0.1)
    raise AssertionError(f"{name} was not restarted:\n{stack.log_tail()}")


def loss_steps(client: httpx.Client, job_id: str) -> list[int]:
    series = client.get(f"/v1/train/jobs/{job_id}/metrics").json()["series"]
    (loss,) = [s for s in series if s["name"] == "loss"]
    return sorted(int(p["step"]) for p in loss["points"])


def test_a_running_job_goes_on_through_a_rolling_restart_of_every_service(
    stack: StackProcess,
) -> None:
    """`trainyard restart` as an upgrade runs it: each service process stopped and started
    again onto the installed code, one at a time, while a job trains; the job ends as if
    nothing happened, and `trainyard status` names each process's version and the
    schema's."""
    client = httpx.Client(
        base_url=stack.url, headers=bearer(stack.create_key("acme", "member")), timeout=30
    )
    created = client.post("/v1/train/jobs", json={**JOB, "hyperparameters": {"max_steps": 30}})
    assert created.status_code == 200, created.text
    job_id = created.json()["id"]
    training = wait_for_job(client, job_id, lambda j: j.get("progress", {}).get("step", 0) >= 1)
    assert training["status"] == "running", training
    before = stack.info()["pids"]
    services = [n for ports in stack.info()["replicas"].values() for n in ports]
    rolled = stack.cli("restart")
    assert rolled.stdout.splitlines()[-1] == "rolling restart finished", rolled.stdout
    after = stack.info()["pids"]
    for name in services:
        assert after[name] != before[name] and not alive(before[name]), name
        assert f"{name} restarted (pid {after[name]})" in rolled.stdout
    for kept in ("seaweedfs", "envoy", "executor"):
        assert after[kept] == before[kept], kept
    done = wait_for_job(client, job_id, lambda j: j["status"] in ("succeeded", "failed"))
    assert (done["status"], done["failure_code"]) == ("succeeded", ""), done
    assert done["attempt_count"] == 1 and loss_steps(client, job_id) == list(range(1, 31))
    client.close()

    shown = stack.cli("status").stdout
    rows = {line.split()[0]: line.split() for line in shown.splitlines() if line.split()}
    # Every process runs the checkout's code, so one build; a restart onto edited files
    # would show the services on another build than the executor.
    builds = {rows[name][6] for name in [*services, "executor"]}
    assert len(builds) == 1 and next(iter(builds)).startswith("0.1.0+"), shown
    assert rows["envoy"][6] == "-"
    (schema,) = [line for line in shown.splitlines() if line.startswith("schema ")]
    assert schema == f"schema {head_revision()}", shown


def test_a_part_that_keeps_exiting_stops_the_stack_and_says_which(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stack = StackProcess(tmp_path / "home").start()
    try:
        pids = dict(stack.info()["pids"])
        killed: list[int] = []
        pid: int | None = pids["envoy"]
        # Each restart is awaited before the next kill, so each is a separate exit.
        while pid is not None:
            assert len(killed) < 10, stack.log_tail()
            kill_group(pid)
            killed.append(pid)
            pid = restarted(stack, "envoy", pid)
        assert stack.proc is not None and stack.proc.wait() == 1
    finally:
        stack.stop()
    log = stack.log_path.read_text()
    assert "envoy keeps exiting (5 restarts within 300s); stopping the stack" in log
    assert len(killed) == 6 and log.count("envoy restarted (pid") == 5
    assert not any(alive(p) for p in [*pids.values(), *killed]), "a child outlived the stack"


@pytest.fixture(scope="module")
def quick_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """A stack whose gateway cuts any request idle for 2 s."""
    running = StackProcess(
        tmp_path_factory.mktemp("quick") / "home",
        env={"TRAINYARD_GATEWAY_IDLE_TIMEOUT_SECONDS": "2"},
    ).start()
    try:
        yield running
    finally:
        running.stop()


def test_an_idle_executor_keeps_one_stream_while_long_polls_are_cut(
    quick_stack: StackProcess,
) -> None:
    store = open_store(quick_stack.database_url, run_migrations=False)

    def hellos() -> int:
        """Each connection of the local executor says hello and leaves a row."""
        with store.unit(write=False) as session:
            count = session.scalar(
                sa.select(sa.func.count())
                .select_from(ExecutorRow)
                .where(ExecutorRow.machine == "local")
            )
            return int(count or 0)

    try:
        deadline = time.monotonic() + 60
        while hellos() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert hellos() == 1, quick_stack.log_tail()

        client = httpx.Client(
            base_url=quick_stack.url, headers=bearer(quick_stack.create_key("acme")), timeout=60
        )
        job = client.post("/v1/train/jobs", json=PARKED).json()
        after = client.get(f"/v1/train/jobs/{job['id']}/events").json()["next_after"]
        # Each long poll asks to wait 20 s for an event; once the job's last one (its
        # snapshot) is read none comes, and the gateway cuts the poll at its idle timeout.
        # Four cut polls span four idle timeouts on the gateway's own clock.
        cut = 0
        for _ in range(8):
            r = client.get(
                f"/v1/train/jobs/{job['id']}/events", params={"after": after, "wait": 20}
            )
            if r.status_code == 200:
                assert r.json()["events"], r.text
                after = r.json()["next_after"]
                continue
            assert r.status_code == 504 and reason(r) == "unavailable", r.text
            cut += 1
            if cut == 4:
                break
        assert cut == 4
        client.close()

        assert hellos() == 1
        assert "stream to the claim service broke" not in quick_stack.log_path.read_text()
    finally:
        store.dispose()


def test_a_watch_of_a_quiet_job_outlasts_the_gateways_idle_timeout(
    quick_stack: StackProcess,
) -> None:
    """A job waiting for a machine says nothing for long; its watch says the job again
    within the gateway's idle timeout, so the stream stays open past it and is not cut."""
    headers = bearer(quick_stack.create_key("acme"))
    with httpx.Client(base_url=quick_stack.url, headers=headers, timeout=30) as client:
        job = client.post("/v1/train/jobs", json=PARKED).json()
        job = wait_for_job(client, job["id"], lambda j: j["preparation"]["status"] == "verified")
        with client.stream("GET", f"/v1/train/jobs/{job['id']}/watch") as watch:
            assert watch.status_code == 200
            lines = (json.loads(line) for line in watch.iter_lines() if line.strip())
            assert next(line for line in lines if line.get("caught_up"))
            started = time.monotonic()
            # Six messages of a quiet job span three idle timeouts of the gateway (2 s).
            quiet = [next(lines) for _ in range(6)]
            spanned = time.monotonic() - started
    assert all(m["job"]["id"] == job["id"] and "event" not in m for m in quiet), quiet
    assert spanned > 2, spanned
