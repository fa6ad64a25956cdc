"""Training end to end: the fixture job created over REST on a stack started the README's
way, trained by the local executor with DeepSpeed, watched live, downloaded and loaded."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import tarfile

import httpx
import pytest
import torch
from safetensors.torch import load

from executor.models import fixture
from tests.support import BIN, StackProcess, bearer, wait_for_job

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": {"max_steps": 20, "save_steps": 10},
}


@pytest.fixture(scope="module")
def key(stack: StackProcess) -> str:
    return stack.create_key("trainers")


@pytest.fixture(scope="module")
def client(stack: StackProcess, key: str) -> httpx.Client:
    return httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)


def test_the_fixture_job_trains_to_success_and_its_artifact_reloads(
    stack: StackProcess, client: httpx.Client, key: str
) -> None:
    created = client.post("/v1/train/jobs", json=JOB).json()
    watched = stack.cli("jobs", "watch", created["id"], key=key)  # plain lines: not a terminal
    job = wait_for_job(
        client, created["id"], lambda j: j["status"] in ("succeeded", "failed", "cancelled")
    )
    assert job["status"] == "succeeded", job.get("failure_code")
    assert "running  step" in watched.stdout and f"{created['id']} succeeded" in watched.stdout
    assert job["progress"]["step"] == job["planned_steps"] == 20
    loss = {p["step"]: p["value"] for p in client.get(f"/v1/train/jobs/{job['id']}/metrics").json()["series"][
        [s["name"] for s in client.get(f"/v1/train/jobs/{job['id']}/metrics").json()["series"]].index("loss")
    ]["points"]}  # fmt: skip
    assert sorted(loss) == list(range(1, 21)) and loss[20] < loss[1]
    evaluation = job["evaluation"]
    assert evaluation["evaluations"] == 2 and evaluation["served_step"] in (10, 20)
    assert job["outcome"]["stop_reason"] == "max_steps" and job["model_available"] is True

    record = client.get(f"/v1/train/jobs/{job['id']}/provenance").json()
    assert record["artifact_sha256"] == job["result"]["sha256"]
    assert record["dataset_sha256"] == job["preparation"]["snapshot_sha256"]
    assert record["base_model_sha256"] == fixture.weights_sha256(fixture.build())

    artifact = client.get(f"/v1/train/artifacts/{job['result']['sha256']}").json()
    packed = httpx.get(artifact["url"]).content
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        for member in tar.getmembers():
            assert (member.mtime, member.uid, member.mode) == (0, 0, 0o644)
            files[member.name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    model = fixture.build()
    model.load_state_dict(load(files["model.safetensors"]))
    probe = load(files["probe.safetensors"])
    with torch.no_grad():
        assert torch.allclose(
            model(input_ids=probe["input_ids"]).logits, probe["logits"], atol=1e-5
        )
    assert json.loads(files["trainyard.json"])["step"] == evaluation["served_step"]


def test_a_cancelled_run_keeps_what_it_trained_and_a_resume_continues(client: httpx.Client) -> None:
    created = client.post(
        "/v1/train/jobs", json={**JOB, "hyperparameters": {"max_steps": 40, "save_steps": 10}}
    ).json()
    wait_for_job(client, created["id"], lambda j: j.get("progress", {}).get("step", 0) >= 5)
    assert (
        client.post(f"/v1/train/jobs/{created['id']}/cancel", json={}).json()["status"]
        == "cancelling"
    )
    cancelled = wait_for_job(
        client, created["id"], lambda j: j["status"] in ("cancelled", "failed")
    )
    assert cancelled["status"] == "cancelled" and cancelled["model_available"] is True
    assert cancelled["outcome"]["stop_reason"] == "cancelled"
    stopped_at = cancelled["result"]["checkpoint_step"]
    assert 5 <= stopped_at < 40

    retry = client.post(
        f"/v1/train/jobs/{created['id']}/retry",
        json={"resume_from_checkpoint": True},
        headers={"Idempotency-Key": "resume-1"},
    ).json()
    assert (
        retry["attempt"]["resume_from_checkpoint"] is True
        and retry["attempt"]["resume_step"] == stopped_at
    )
    done = wait_for_job(
        client,
        created["id"],
        lambda j: j["attempt_count"] == 2 and j["status"] in ("succeeded", "failed"),
    )
    assert done["status"] == "succeeded" and done["progress"]["step"] == 40
    series = client.get(f"/v1/train/jobs/{created['id']}/metrics", params={"names": "loss"}).json()[
        "series"
    ]
    steps = [p["step"] for p in series[0]["points"]]
    # The second attempt picked up at the step after the state it resumed from.
    assert steps.count(stopped_at + 1) == 1 and max(steps) == 40
    # Its tokens seen go on from the checkpoint's count: one point a step, growing.
    (seen,) = client.get(
        f"/v1/train/jobs/{created['id']}/metrics", params={"names": "tokens_seen"}
    ).json()["series"]
    counts = [(p["step"], p["value"]) for p in seen["points"]]
    assert [s for s, _ in counts] == list(range(1, 41))
    values = [v for _, v in counts]
    assert values == sorted(set(values))


def test_a_job_naming_two_machines_trains_across_two_executors(
    stack: StackProcess, client: httpx.Client
) -> None:
    executor_key = stack.create_key("trainers", "executor")
    agents = [
        subprocess.Popen(
            [str(BIN / "trainyard"), "executor", "--machine", machine],
            env={**stack.env, "TRAINYARD_URL": stack.url, "TRAINYARD_API_KEY": executor_key,
                 "OMP_NUM_THREADS": "1", "TRAINYARD_LOG_FORMAT": "text"},
            stdout=subprocess.DEVNULL, stderr=open(stack.home.parent / f"agent-{machine}.log", "w"),  # noqa: SIM115 (the child holds it)
        )
        for machine in ("m1", "m2")
    ]  # fmt: skip
    try:
        spec = {
            **JOB,
            "resources": {"machines": ["m1", "m2"]},
            "hyperparameters": {"max_steps": 12, "save_steps": 6},
        }
        created = client.post("/v1/train/jobs", json=spec).json()
        job = wait_for_job(
            client, created["id"], lambda j: j["status"] in ("succeeded", "failed", "cancelled")
        )
        assert job["status"] == "succeeded", job.get("failure_code")
        assert job["progress"]["step"] == 12 and job["model_available"] is True
        events = client.get(
            f"/v1/train/jobs/{created['id']}/events", params={"page_size": 500}
        ).json()["events"]
        assert any(e["type"] == "coordinator" for e in events)
    finally:
        for agent in agents:
            agent.send_signal(signal.SIGTERM)
        for agent in agents:
            try:
                agent.wait(60)
            except subprocess.TimeoutExpired:
                agent.kill()
