"""An org's machine cannot make the platform's executor unpack a crafted archive. The
attack, through the real stack on SQLite and PostgreSQL: the org's executor key stores a
tar of links as its own LoRA job's output (the kind the job makes, so the grant allows it),
the job succeeds, and a member of the org names that output as a new job's `from`, a job
naming no machine, which the platform's executor would claim and unpack. The create is
refused by field, nothing is written outside, and a grant of a kind the job does not
make is refused too."""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import tarfile
from pathlib import Path

import httpx
import pytest

from tests.support import StackProcess, bearer, reason

BASE = "fixture-tiny-llm"
MACHINE = "org-box"


def crafted_adapter(outside: Path) -> bytes:
    """A LoRA adapter in every way `from` reads (its peft config), with a link out of
    the work directory and a file written through it."""
    config = json.dumps({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in (("adapter_config.json", config.encode()),):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("escape")
        link.type, link.linkname = tarfile.SYMTYPE, str(outside)
        tar.addfile(link)
        payload = b"raise SystemExit('owned')\n"
        planted = tarfile.TarInfo("escape/sitecustomize.py")
        planted.size = len(payload)
        tar.addfile(planted, io.BytesIO(payload))
    return out.getvalue()


@pytest.fixture
def org(each_stack: StackProcess) -> tuple[httpx.Client, httpx.Client]:
    """A member of a fresh org, and that org's own machine."""
    name = f"org-{secrets.token_hex(4)}"
    member = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(name)), timeout=60
    )
    machine = httpx.Client(
        base_url=each_stack.url,
        headers=bearer(each_stack.create_key(name, "executor")),
        timeout=60,
    )
    return member, machine


def claimed_lora_job(member: httpx.Client, machine: httpx.Client) -> tuple[str, dict[str, str]]:
    """A LoRA job on the org's machine, claimed by it: the job's id and the lease."""
    created = member.post(
        "/v1/train/jobs",
        json={"base_model": BASE, "dataset": {"uri": "fixture:synthetic-tiny-v1"},
              "adaptation": {"mode": "lora", "rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]},
              "resources": {"machines": [MACHINE]}, "output": {"kind": "lora", "name": "mine"}},
    )  # fmt: skip
    assert created.status_code == 200, created.text
    job = created.json()["id"]
    claimed = machine.post(
        "/v1/train/jobs/claim",
        json={"machine": MACHINE, "platform": False, "bases": [BASE], "devices": ["cpu"],
              "supports": {"adaptations": ["lora"], "outputs": ["lora"]}},
    )  # fmt: skip
    assert claimed.status_code == 200 and claimed.json()["task"]["job"] == job, claimed.text
    task = claimed.json()["task"]
    return job, {"task": task["id"], "lease": task["lease"]}


def register(
    machine: httpx.Client, job: str, lease: dict[str, str], kind: str, data: bytes
) -> httpx.Response:
    return machine.post(
        f"/v1/train/jobs/{job}/artifacts",
        json={**lease, "kind": kind, "name": "mine", "sha256": hashlib.sha256(data).hexdigest(),
              "size": len(data)},
    )  # fmt: skip


def test_a_crafted_output_cannot_reach_the_platforms_executor(
    org: tuple[httpx.Client, httpx.Client], tmp_path: Path
) -> None:
    member, machine = org
    outside = tmp_path / "outside"
    outside.mkdir()
    job, lease = claimed_lora_job(member, machine)
    crafted = crafted_adapter(outside)
    sha256 = hashlib.sha256(crafted).hexdigest()

    # The org's machine stores it as its job's output, as any output is stored.
    grant = register(machine, job, lease, "lora", crafted)
    assert grant.status_code == 200, grant.text
    upload = grant.json()["upload"]
    assert httpx.put(upload["url"], content=crafted, headers=upload["headers"]).status_code == 200
    done = machine.post(
        f"/v1/train/jobs/{job}/events",
        json={**lease, "events": [
            {"type": "status", "status": "running"},
            {"type": "artifact", "sha256": sha256},
            {"type": "status", "status": "finalizing"},
            {"type": "result", "result": {"sha256": sha256, "base_sha256": "b" * 64, "step": 1}},
        ]},
    )  # fmt: skip
    assert done.status_code == 200 and done.json()["status"] == "succeeded", done.text

    # A job `from` it naming no machine (the platform's executor would run it) is refused
    # at create, by field and without the sha256.
    refused = member.post(
        "/v1/train/jobs",
        json={"base_model": BASE, "dataset": {"uri": "fixture:synthetic-tiny-v1"},
              "adaptation": {"mode": "lora"}, "from": sha256},
    )  # fmt: skip
    assert refused.status_code == 400, refused.text
    assert reason(refused) == "invalid_request" and refused.json()["fields"] == ["from"]
    assert sha256 not in refused.text
    assert member.get("/v1/train/jobs").json().get("total_size") == 1
    assert list(outside.iterdir()) == []


def test_an_output_of_a_kind_the_job_does_not_make_is_refused(
    org: tuple[httpx.Client, httpx.Client],
) -> None:
    member, machine = org
    job, lease = claimed_lora_job(member, machine)
    data = secrets.token_bytes(512)
    for kind in ("capability", "merged", "basis"):
        refused = register(machine, job, lease, kind, data)
        assert refused.status_code == 400 and reason(refused) == "invalid_request", refused.text
    # Its own kind and its resumable state are what it registers.
    assert register(machine, job, lease, "lora", data).status_code == 200
    assert register(machine, job, lease, "checkpoint", secrets.token_bytes(64)).status_code == 200
