"""A client written from HIP-1333 §2–§6 alone, with `httpx` and the seed's own bodies: an
org's executor claims over REST, reports as §5 shows (no sequence numbers), stores its
output under a §6 grant, and the owner reads the job, its artifacts and the bytes back."""

from __future__ import annotations

import hashlib
import io
import secrets
import tarfile

import httpx

from tests.support import StackProcess, bearer


def tar_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_a_client_that_follows_the_seed_literally(stack: StackProcess) -> None:
    org = f"seed-{secrets.token_hex(3)}"
    owner = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(org)), timeout=60)
    machine = httpx.Client(
        base_url=stack.url, headers=bearer(stack.create_key(org, "executor")), timeout=60
    )

    # §2, §3: the bases, then a job on the org's own machine.
    assert "fixture-tiny-llm" in [m["name"] for m in owner.get("/v1/train/models").json()["models"]]
    created = owner.post(
        "/v1/train/jobs",
        json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
              "resources": {"machines": ["gpu-0"]}, "output": {"kind": "checkpoint", "name": "seed"}},
    )  # fmt: skip
    assert created.status_code == 200
    job = created.json()
    assert isinstance(job["number"], int) and job["status"] == "queued"

    # §5: the claim body as the seed shows it (for this org's machine and base).
    claim = {"machine": "gpu-0", "platform": False, "bases": ["fixture-tiny-llm"],
             "devices": ["cpu"], "supports": {"adaptations": ["full", "lora"],
                                              "outputs": ["checkpoint", "lora"]}}  # fmt: skip
    claimed = machine.post("/v1/train/jobs/claim", json=claim)
    assert claimed.status_code == 200, claimed.text
    answer = claimed.json()
    task = answer["task"]
    assert answer["org"] == org and task["job"] == job["id"] and task["role"] == "lead"
    assert isinstance(task["held"], int) and isinstance(task["report"], int)
    lease = {"task": task["id"], "lease": task["lease"]}

    # §5: reports exactly as shown, without sequence numbers.
    events = f"/v1/train/jobs/{job['id']}/events"
    running = machine.post(
        events, json={**lease, "events": [{"type": "status", "status": "running"}]}
    )
    assert running.status_code == 200 and running.json()["status"] == "running"
    metric = {"type": "metric", "name": "nll", "step": 100, "value": 0.66}
    reported = machine.post(events, json={**lease, "events": [metric]})
    assert reported.status_code == 200
    assert set(reported.json()) == {"cancel", "held", "status", "seq"}
    assert reported.json()["cancel"] is False and isinstance(reported.json()["seq"], int)

    # §6: the output registered, put under its grant, and named in an `artifact` event.
    output = tar_of({"model.safetensors": secrets.token_bytes(4096), "config.json": b"{}"})
    sha256 = hashlib.sha256(output).hexdigest()
    grant = machine.post(
        f"/v1/train/jobs/{job['id']}/artifacts",
        json={**lease, "kind": "checkpoint", "name": "seed", "sha256": sha256, "size": len(output),
              "meta": {"step": "100"}},
    )  # fmt: skip
    assert grant.status_code == 200 and grant.json()["stored"] is False
    upload = grant.json()["upload"]
    assert upload["method"] == "PUT" and isinstance(upload["expires"], int)
    put = httpx.put(upload["url"], content=output, headers=upload["headers"], timeout=60)
    assert put.status_code == 200
    done = machine.post(
        events,
        json={**lease, "events": [
            {"type": "artifact", "sha256": sha256},
            {"type": "status", "status": "finalizing"},
            {"type": "result", "result": {"sha256": sha256, "base_sha256": "b" * 64, "step": 100}},
        ]},
    )  # fmt: skip
    assert done.status_code == 200 and done.json()["status"] == "succeeded", done.text

    # §2: the job with its spec, status, result and artifacts; the bytes read back.
    read = owner.get(f"/v1/train/jobs/{job['id']}").json()
    assert read["status"] == "succeeded" and read["result"]["sha256"] == sha256
    # Byte counts stay int64 in the proto, so JSON carries them as strings (a noted exception).
    assert read["result"]["size"] == len(output) and read["model_available"] is True
    assert sha256 in [a["sha256"] for a in read["artifacts"]]
    nll = owner.get(f"/v1/train/jobs/{job['id']}/metrics").json()["series"]
    assert [(s["name"], [p["step"] for p in s["points"]]) for s in nll] == [("nll", [100])]
    one = owner.get(f"/v1/train/artifacts/{sha256}").json()
    body = httpx.get(one["url"], headers=one["headers"], timeout=60).content
    assert hashlib.sha256(body).hexdigest() == sha256
    # A report once the job has ended records nothing and answers its status (§5).
    late = machine.post(events, json={**lease, "events": [metric]})
    assert late.status_code == 200 and late.json()["status"] == "succeeded"
