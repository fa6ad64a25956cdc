"""The `jobs` commands as a user meets them on the session's stack: a trained job's model
and state downloaded and unpacked (bytes that do not verify refused, leaving nothing), the
reads of a job, refusals in plain lines, an upload that is no dataset refused, and the
SDK's upload of a path given as text."""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from safetensors.torch import load_file

from executor.models import fixture
from infra.objectstore import credentials
from services.core.s3 import client as s3_client
from tests.support import BIN, StackProcess, bearer, wait_for_job
from trainyard import sdk

FIXTURE = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}
ENDED = ("succeeded", "failed", "cancelled")
ROW = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'


@pytest.fixture(scope="module")
def org(stack: StackProcess) -> tuple[str, str]:
    """An org of this module's own, and a member key of it."""
    name = f"cli-jobs-{secrets.token_hex(3)}"
    return name, stack.create_key(name, "member")


@pytest.fixture(scope="module")
def api(stack: StackProcess, org: tuple[str, str]) -> httpx.Client:
    return httpx.Client(base_url=stack.url, headers=bearer(org[1]), timeout=60)


@pytest.fixture(scope="module")
def trained(api: httpx.Client) -> dict[str, Any]:
    made = api.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"max_steps": 4}})
    assert made.status_code == 200, made.text
    job = wait_for_job(api, made.json()["id"], lambda j: j["status"] in ENDED)
    assert job["status"] == "succeeded", job.get("failure_code")
    return job


@pytest.fixture
def cli(stack: StackProcess, org: tuple[str, str], tmp_path: Path) -> Any:
    """`trainyard ARGS…` as the org's member, run in the test's own directory."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**stack.env, "TRAINYARD_URL": stack.url, "TRAINYARD_API_KEY": org[1]}
        return subprocess.run(
            [str(BIN / "trainyard"), *args],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    return run


def test_download_unpacks_the_model_and_its_state(
    cli: Any, trained: dict[str, Any], tmp_path: Path
) -> None:
    job_id = trained["id"]
    done = cli("jobs", "download", job_id)
    assert done.returncode == 0, done.stderr
    model_dir = tmp_path / job_id  # the default: ./JOB_ID
    assert done.stdout.startswith(f"{job_id}  verified, ")
    assert {"config.json", "model.safetensors", "probe.safetensors", "trainyard.json"} <= {
        p.name for p in model_dir.iterdir()
    }
    assert (
        json.loads((model_dir / "trainyard.json").read_text())["step"] == trained["result"]["step"]
    )
    fixture.build().load_state_dict(load_file(model_dir / "model.safetensors"))  # a model, whole

    state = cli("jobs", "download", job_id, "--state", "-o", "saved")
    assert state.returncode == 0, state.stderr
    assert (tmp_path / "saved" / "latest").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [job_id, "saved"]  # nothing else left


def test_a_download_that_does_not_verify_is_refused_and_leaves_nothing(
    cli: Any,
    stack: StackProcess,
    api: httpx.Client,
    org: tuple[str, str],
    trained: dict[str, Any],
    tmp_path: Path,
) -> None:
    sha256 = trained["result"]["checkpoint_sha256"]
    found = api.get(f"/v1/train/artifacts/{sha256}").json()
    original = httpx.get(found["url"]).content
    key = stack.object_key(org[0], sha256)
    store = s3_client(stack.info()["s3_endpoint"], *credentials(stack.home)[:2])

    def put(body: bytes) -> None:  # as the store would hold bytes gone bad, under the same key
        store.put_object(
            Bucket="trainyard", Key=f"{org[0]}/{sha256}", Body=body,
            SSECustomerAlgorithm="AES256", SSECustomerKey=key,
        )  # fmt: skip

    put(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        done = cli("jobs", "download", trained["id"], "--state")
    finally:
        put(original)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("error: ARTIFACT_MISMATCH: ") and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_job_without_a_result_is_refused_plainly(cli: Any, api: httpx.Client) -> None:
    parked = api.post("/v1/train/jobs", json={**FIXTURE, "resources": {"machines": ["nowhere"]}})
    job_id = parked.json()["id"]
    for args, reason in [((), "RESULT_UNAVAILABLE"), (("--state",), "CHECKPOINT_UNAVAILABLE")]:
        done = cli("jobs", "download", job_id, *args)
        assert done.returncode == 1 and done.stderr.startswith(f"error: {reason}: "), done.stderr


def test_the_reads_of_a_job_print_what_a_user_needs(
    cli: Any, api: httpx.Client, trained: dict[str, Any]
) -> None:
    job_id = trained["id"]
    before = api.get("/v1/train/jobs").json()["total_size"]
    estimate = cli("jobs", "estimate", "--fixture", "--max-steps", "7").stdout.splitlines()
    assert estimate[0].startswith("plan       7 steps") and estimate[2].endswith("admitted")
    assert estimate[3].startswith("price      $") and "held while it runs" in estimate[3]
    assert api.get("/v1/train/jobs").json()["total_size"] == before  # it created nothing

    dataset = cli("jobs", "dataset", job_id, "--limit", "2")
    lines = dataset.stdout.splitlines()
    assert lines[0] == "fx-0001  train  2 messages  reverse 1"
    role, verb, word = lines[1].split()  # the fixture's task: reverse a word
    assert (role, verb) == ("user", "Reverse:") and lines[2].split() == ["assistant", word[::-1]]
    assert "2 examples of 160 (all); next: --offset 2" in dataset.stderr
    one = cli("jobs", "dataset", job_id, "fx-0001").stdout.splitlines()
    assert one[1:] == ["[user]", f"Reverse: {word}", "[assistant]", word[::-1]]

    metrics = cli("jobs", "metrics", job_id, "--name", "loss").stdout.splitlines()
    assert metrics[0].startswith("loss  4 points  ") and metrics[1].split() == ["step", "value"]
    assert [int(line.split()[0]) for line in metrics[2:]] == [1, 2, 3, 4]

    held = cli("jobs", "artifacts", job_id).stdout
    for sha256, kind in [
        (trained["result"]["sha256"], "checkpoint"),
        (trained["result"]["checkpoint_sha256"], "checkpoint"),
        (trained["preparation"]["snapshot_sha256"], "snapshot"),
    ]:
        assert f"{sha256}  {kind}" in held
    record = json.loads(cli("jobs", "provenance", job_id).stdout)
    assert record["artifact_sha256"] == trained["result"]["sha256"]


def test_a_finished_job_shows_its_throughput_and_no_mfu_on_cpu(
    cli: Any, api: httpx.Client, trained: dict[str, Any]
) -> None:
    """Over REST and in `jobs get` alike: the last step's pace, the FLOPs it stands for,
    and `mfu` null, as the CPU has no dense peak to measure it against."""
    rest = api.get(f"/v1/train/jobs/{trained['id']}").json()["progress"]
    shown = json.loads(cli("jobs", "get", trained["id"]).stdout)["progress"]
    for progress in (rest, shown):
        assert progress["tokens_per_second"] > 0 and progress["samples_per_second"] > 0
        assert progress["model_tflops"] > 0 and progress["flops_per_token"] > 0
        assert progress["mfu"] is None and progress["peak_tflops"] is None
    assert shown == rest


def test_a_refusal_prints_its_code_and_detail_in_two_plain_lines(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps({**FIXTURE, "hyperparameters": {"colour": 1}}))
    for command in ("create", "estimate"):
        done = cli("jobs", command, "-f", "job.json")
        assert (done.returncode, done.stdout) == (1, "")
        first, second = done.stderr.splitlines()
        assert first == "error: INVALID_REQUEST: Field hyperparameters.colour is not a known field."
        assert second.startswith("  field: hyperparameters.colour; supported: num_train_epochs, ")
    bounded = cli("jobs", "create", "--fixture", "--max-steps", "0")
    assert bounded.returncode == 1
    assert bounded.stderr.splitlines()[1] == "  field: hyperparameters.max_steps; max: 100; min: 1"
    missing = cli("jobs", "get", "job_0000000000000000")
    assert (missing.returncode, missing.stderr) == (1, "error: NOT_FOUND: No such resource.\n")


def test_an_upload_that_is_no_dataset_is_refused_and_not_kept(cli: Any, tmp_path: Path) -> None:
    rows = ROW + b'{"messages": [{"role": "bot", "content": "x"}]}\n'
    (tmp_path / "rows.jsonl").write_bytes(rows)
    done = cli("artifacts", "upload", "rows.jsonl")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: TRAINING_DATASET_UNUSABLE: Line 2 has messages[0].role that is not one of system, "
        "user, assistant.",
        "  field: dataset.uri; line: 2; problem: unknown_role; row_field: messages[0].role; "
        "supported: system, user, assistant",
    ]
    assert hashlib.sha256(rows).hexdigest() not in cli("artifacts", "ls").stdout


def test_the_sdk_uploads_a_path_given_as_text(
    stack: StackProcess, org: tuple[str, str], tmp_path: Path
) -> None:
    rows = ROW + json.dumps({"messages": [{"role": "user", "content": tmp_path.name}]}).encode()
    (tmp_path / "rows.jsonl").write_bytes(rows)
    with sdk.Client(stack.url, org[1]) as client:
        stored = client.upload(str(tmp_path / "rows.jsonl"))
        assert (stored.sha256, stored.status) == (hashlib.sha256(rows).hexdigest(), "stored")
        back = client.download(stored.sha256, str(tmp_path / "back.jsonl"))
    assert back.read_bytes() == rows
