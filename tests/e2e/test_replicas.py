"""Two replicas of every service on PostgreSQL, behind Envoy, as an operator starts them
(`TRAINYARD_REPLICAS=2 trainyard up`): each replica is a process of its own in stack.json
and `trainyard status`, Envoy balances over both, a job trains to success over REST, and
one replica killed mid-job leaves REST answering from the other while the supervisor
brings it back on its own port."""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from gateway.render import SERVICES
from services.core.store import create_engine, normalise_url
from tests.conftest import PG_URL
from tests.support import StackProcess, alive, eventually, wait_for_job

pytestmark = pytest.mark.skipif(not PG_URL, reason="TRAINYARD_TEST_DATABASE_URL is not set")

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": {"max_steps": 12},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """The README's stack with two replicas of each service, on a schema of its own."""
    schema = f"ty_{secrets.token_hex(6)}"
    with create_engine(PG_URL).begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    base = normalise_url(PG_URL)
    sep = "&" if "?" in base else "?"
    env = {
        "TRAINYARD_REPLICAS": "2",
        "TRAINYARD_DATABASE_URL": f"{base}{sep}options=-csearch_path%3D{schema}",
    }
    running = StackProcess(tmp_path_factory.mktemp("replicas") / "home", env=env)
    try:
        yield running.start(timeout=240)
    finally:
        running.stop()
        with create_engine(PG_URL).begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


def envoy_admin(stack: StackProcess) -> httpx.Client:
    """Envoy's admin, on its unix socket (the loopback port serves only metrics)."""
    uds = httpx.HTTPTransport(uds=stack.info()["admin_socket"])
    return httpx.Client(transport=uds, base_url="http://envoy", timeout=10)


def envoy_hosts(stack: StackProcess) -> dict[str, dict[int, str]]:
    """Each cluster's hosts as Envoy sees them: port → health flags."""
    with envoy_admin(stack) as admin:
        text = admin.get("/clusters").text
    hosts: dict[str, dict[int, str]] = {}
    for line in text.splitlines():
        cluster, address, *rest = line.split("::")
        # The services' clusters; not `admin`, the metrics listener's way to the admin socket.
        if rest[:1] == ["health_flags"] and cluster != "admin":
            hosts.setdefault(cluster, {})[int(address.rsplit(":", 1)[1])] = rest[1]
    return hosts


def envoy_stat(stack: StackProcess, name: str) -> int:
    with envoy_admin(stack) as admin:
        text = admin.get("/stats", params={"filter": f"^{name}$"}).text
    (line,) = text.splitlines()
    return int(line.split(": ")[1])


def test_each_replica_is_a_process_of_its_own_behind_the_gateway(stack: StackProcess) -> None:
    info = stack.info()
    for service in SERVICES:
        names = [service, f"{service}-2"]
        assert sorted(info["replicas"][service]) == names
        ports = [info["replicas"][service][name] for name in names]
        assert ports[0] != ports[1] and info["service_ports"][service] == ports[0]
        pids = [info["pids"][name] for name in names]
        assert pids[0] != pids[1] and all(alive(pid) for pid in pids)
        assert [info["restarts"][name] for name in names] == [0, 0]
        assert info["metrics"][names[0]] != info["metrics"][names[1]]
        for name, port in zip(names, ports, strict=True):
            run = stack.home / "run"
            assert (run / f"{name}.port").read_text().strip() == str(port)
            assert httpx.get(info["metrics"][name], timeout=10).status_code == 200
    # Envoy balances over both replicas of each service, both passing its health check;
    # the Tinker wire is one process whatever the replicas.
    want = {s: dict.fromkeys(info["replicas"][s].values(), "healthy") for s in SERVICES}
    assert list(info["replicas"]["tinker"]) == ["tinker"]
    want["tinker"] = dict.fromkeys(info["replicas"]["tinker"].values(), "healthy")
    eventually(lambda: envoy_hosts(stack), lambda hosts: hosts == want, "envoy's hosts")

    shown = stack.cli("status").stdout
    rows = {line.split()[0]: line.split() for line in shown.splitlines() if line.split()}
    for name, pid in info["pids"].items():
        assert rows[name][1:3] == [str(pid), "yes"], shown
    for service in SERVICES:
        assert rows[service][3] == rows[f"{service}-2"][3] == "serving", shown


def test_rest_answers_through_a_replica_killed_mid_job_and_the_job_succeeds(
    stack: StackProcess,
) -> None:
    client = stack.member_client()
    created = client.post("/v1/train/jobs", json=JOB)
    assert created.status_code == 200, created.text
    job_id = created.json()["id"]
    wait_for_job(client, job_id, lambda j: j.get("progress", {}).get("step", 0) >= 1)

    before = stack.info()
    old = int(before["pids"]["jobs-2"])
    retried = envoy_stat(stack, "cluster.jobs.upstream_rq_retry")
    os.killpg(old, signal.SIGKILL)
    # Every read while jobs-2 is down and coming back is answered, by the other replica.
    deadline = time.monotonic() + 90
    answered = 0
    while (new := int(stack.info()["pids"]["jobs-2"])) == old:
        r = client.get(f"/v1/train/jobs/{job_id}")
        assert r.status_code == 200, r.text
        answered += 1
        assert time.monotonic() < deadline, stack.log_tail()
    assert answered > 0
    # Some of those reads went to the dead replica first and were sent on to the other.
    assert envoy_stat(stack, "cluster.jobs.upstream_rq_retry") > retried

    after = stack.info()
    assert not alive(old) and alive(new)
    assert after["restarts"]["jobs-2"] == 1 and after["restarts"]["jobs"] == 0
    assert after["pids"]["jobs"] == before["pids"]["jobs"]
    # Back on its own port and metrics URL, and in Envoy's rotation again.
    assert after["replicas"] == before["replicas"]
    assert after["metrics"]["jobs-2"] == before["metrics"]["jobs-2"]
    assert httpx.get(after["metrics"]["jobs-2"], timeout=10).status_code == 200
    port = after["replicas"]["jobs"]["jobs-2"]
    eventually(lambda: envoy_hosts(stack)["jobs"][port], lambda f: f == "healthy", "jobs-2")
    log = stack.log_path.read_text()
    assert "jobs-2 exited (-9); restarting it" in log
    assert f"jobs-2 restarted (pid {new})" in log

    done = wait_for_job(client, job_id, lambda j: j["status"] in ("succeeded", "failed"))
    assert (done["status"], done["failure_code"]) == ("succeeded", ""), done
    assert done["progress"]["step"] == done["planned_steps"] == 12
    client.close()
