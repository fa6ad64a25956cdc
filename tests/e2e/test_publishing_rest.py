"""Publishing as HIP-1333 §6 writes it, over REST through Envoy and with the CLI, on a stack
started the README's way: the fixture job trains to a checkpoint, which is published
without a route (a route is a capability's), kept from deletion while published, and not in
the platform's list of capabilities."""

from __future__ import annotations

import json
import secrets

import httpx

from tests.support import StackProcess, bearer, reason, wait_for_job

JOB = {
    "base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "hyperparameters": {"max_steps": 3}, "resources": {"budget": 100},
    "output": {"kind": "checkpoint", "name": "tiny-e2e"},
}  # fmt: skip


def test_a_trained_checkpoint_is_published_kept_and_not_a_capability(stack: StackProcess) -> None:
    key = stack.create_key(f"pub-{secrets.token_hex(3)}")
    member = httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)
    platform_key = stack.create_key("platform", "platform")
    platform = httpx.Client(base_url=stack.url, headers=bearer(platform_key), timeout=60)
    created = member.post("/v1/train/jobs", json=JOB).json()
    job = wait_for_job(
        member, created["id"], lambda j: j["status"] in ("succeeded", "failed", "cancelled")
    )
    assert job["status"] == "succeeded", job.get("failure_code")
    path = f"/v1/train/jobs/{job['id']}/publish"

    routed = member.post(path, json={"route": {"keys": ["topic"]}})
    assert routed.status_code == 400 and reason(routed) == "invalid_request"
    assert routed.json()["fields"] == ["route"] and "topic" not in routed.text

    answer = member.post(path, json={})
    assert answer.status_code == 200, answer.text
    published = answer.json()
    assert (published["name"], published["job_id"]) == ("tiny-e2e", job["id"])
    assert (published["sha256"], published["form"], published["forced"]) == (
        job["result"]["sha256"],
        "full",
        False,
    )
    assert "route" not in published
    # The CLI publishes the same output under another name and prints the publication.
    copy = stack.cli("jobs", "publish", job["id"], "--name", "tiny-copy", key=key)
    assert json.loads(copy.stdout)["name"] == "tiny-copy"

    digest = job["result"]["sha256"]
    for deleted in (
        member.delete(f"/v1/train/artifacts/{digest}"),
        member.delete(f"/v1/train/jobs/{job['id']}/artifacts/{digest}"),
    ):
        assert deleted.status_code == 409 and reason(deleted) == "published"
    assert member.get(f"/v1/train/artifacts/{digest}").json()["published"] is True

    refused = member.get("/v1/train/published")
    assert refused.status_code == 403 and reason(refused) == "permission_denied"
    listed = platform.get("/v1/train/published")
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["changed"] is True and len(body["revision"]) == 64
    # A checkpoint is not a capability: the platform's list does not carry it.
    assert digest not in {p["sha256"] for p in body.get("data", [])}
    held = platform.get("/v1/train/published", params={"revision": body["revision"]}).json()
    assert (held["revision"], held["changed"], held.get("data", [])) == (
        body["revision"],
        False,
        [],
    )
    polled = stack.cli("published", "--revision", body["revision"], key=platform_key)
    assert json.loads(polled.stdout) == {
        "revision": body["revision"],
        "changed": False,
        "data": [],
    }
