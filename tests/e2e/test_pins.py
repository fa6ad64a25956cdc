"""Checkpoints a user can keep, and where a queued job is (issue 30, items 3 and 4's queue):
pin, unpin and extend over REST and the CLI on an upload (no training), what each object
and the wallet cost a month, and a job waiting behind the local executor's running one
reading its place and when it should start. On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from pathlib import Path

import httpx

from tests.support import StackProcess, bearer, eventually, wait_for_job

TERMINAL = {"succeeded", "rejected", "failed", "cancelled", "stopped"}
GB = 10**9


def rows(tag: str) -> bytes:
    return "".join(
        json.dumps({"messages": [{"role": "user", "content": f"{tag} {i}"},
                                 {"role": "assistant", "content": f"ok {i}"}]}) + "\n"
        for i in range(12)
    ).encode()  # fmt: skip


def parsed(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_an_upload_is_pinned_unpinned_and_kept_longer_with_its_cost_shown(
    each_stack: StackProcess, tmp_path: Path
) -> None:
    stack = each_stack
    org = f"pins-{secrets.token_hex(3)}"
    key = stack.create_key(org)
    data = rows(org)
    digest = hashlib.sha256(data).hexdigest()
    (tmp_path / "rows.jsonl").write_bytes(data)
    stack.cli("artifacts", "upload", str(tmp_path / "rows.jsonl"), key=key)
    api = httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)
    with api:
        rate = next(
            r["micro_cents"]
            for r in api.get("/v1/train/rates").json()["rates"]
            if r["meter"] == "storage-gb-month"
        )
        month = len(data) * rate / GB / 10**6  # cents
        stored = api.get(f"/v1/train/artifacts/{digest}").json()
        assert (stored["pinned"], stored["kept_by"]) == (False, None)
        assert stored["expire_time"] == stored["expires_at"] and stored["expire_time"]
        assert abs(stored["storage_cost_per_month"] - month) < 1e-12 and month > 0

        # Pinned: no expiry, kept by the pin; pinning again is a no-op.
        pinned = api.post(f"/v1/train/artifacts/{digest}/pin", json={})
        assert pinned.status_code == 200, pinned.text
        body = pinned.json()
        assert (body["pinned"], body["expire_time"], body["kept_by"]) == (True, None, "pinned")
        again = api.post(f"/v1/train/artifacts/{digest}/pin", json={}).json()
        assert {k: again[k] for k in ("pinned", "expire_time", "kept_by")} == {
            k: body[k] for k in ("pinned", "expire_time", "kept_by")
        }
        refused = api.delete(f"/v1/train/artifacts/{digest}")
        assert refused.status_code == 409 and refused.json()["code"] == "pinned"
        listed = api.get("/v1/train/artifacts").json()["artifacts"]
        assert [(a["sha256"], a["pinned"]) for a in listed] == [(digest, True)]

        unpinned = api.post(f"/v1/train/artifacts/{digest}/unpin", json={}).json()
        assert (unpinned["pinned"], unpinned["kept_by"]) == (False, None)
        assert unpinned["expire_time"] == stored["expire_time"]
        assert api.post(f"/v1/train/artifacts/{digest}/unpin", json={}).json()["pinned"] is False

        # Kept 60 days from now: only the expiry moved; no new upload was granted.
        before = dt.datetime.now(dt.UTC)
        extended = api.post(
            f"/v1/train/artifacts/{digest}/extend", json={"ttl_seconds": 60 * 86400}
        )
        assert extended.status_code == 200, extended.text
        longer = extended.json()
        expiry = parsed(longer["expire_time"]) - before
        assert (
            dt.timedelta(days=60) - dt.timedelta(minutes=5)
            < expiry
            <= dt.timedelta(days=60, minutes=5)
        )
        assert (longer["sha256"], longer["size"], longer["status"]) == (digest, len(data), "stored")
        shorter = api.post(f"/v1/train/artifacts/{digest}/extend", json={"ttl_seconds": 86400})
        assert shorter.status_code == 400
        assert (shorter.json()["code"], shorter.json()["fields"]) == (
            "invalid_request",
            ["ttl_seconds"],
        )
        too_long = api.post(f"/v1/train/artifacts/{digest}/extend", json={"ttl_seconds": 10**9})
        assert too_long.status_code == 400 and too_long.json()["metadata"] == {
            "max": str(90 * 86400)
        }
        unknown = api.post(
            f"/v1/train/artifacts/{digest}/extend", json={"ttl_seconds": 1, "days": 2}
        )
        assert unknown.status_code == 400 and unknown.json()["fields"] == ["days"]
        assert (
            api.get(f"/v1/train/artifacts/{digest}").json()["expire_time"] == longer["expire_time"]
        )
        # Another org's object answers exactly as an unknown one.
        with httpx.Client(
            base_url=stack.url, headers=bearer(stack.create_key(f"{org}-x")), timeout=60
        ) as other:
            foreign = other.post(f"/v1/train/artifacts/{digest}/pin", json={})
            unknown_sha = other.post(f"/v1/train/artifacts/{'0' * 64}/pin", json={})
            assert foreign.status_code == unknown_sha.status_code == 404
            assert foreign.json() == unknown_sha.json()

        wallet = api.get("/v1/train/wallet").json()
        assert wallet["storage_bytes"] == len(data)
        assert abs(wallet["storage_cost_per_month"] - month) < 1e-12

    # The CLI: pin, list, extend, get, unpin, and the wallet's storage line.
    pin = stack.cli("artifacts", "pin", digest, key=key).stdout
    assert pin.startswith(digest) and "pinned yes" in pin and "kept by pinned" in pin
    header, row = stack.cli("artifacts", "ls", key=key).stdout.splitlines()
    assert header.split() == ["sha256", "kind", "bytes", "expires", "pinned", "cents/month", "name"]
    assert row.split() == [
        digest,
        "dataset",
        str(len(data)),
        "kept",
        "yes",
        f"{month:.3g}",
        "rows.jsonl",
    ]
    unpin = stack.cli("artifacts", "unpin", digest, key=key).stdout
    assert "pinned no" in unpin and "kept by -" in unpin
    extend = stack.cli("artifacts", "extend", digest, "--ttl", "80d", key=key).stdout
    when = (dt.datetime.now(dt.UTC) + dt.timedelta(days=80)).strftime("%Y-%m-%d")
    assert f"expires {when}" in extend and f"{month:.3g} cents a month" in extend
    bad = stack.cli("artifacts", "extend", digest, "--ttl", "1d", key=key, check=False)
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr and "ttl_seconds" in bad.stderr
    got = stack.cli("artifacts", "get", digest, "-o", str(tmp_path / "back.jsonl"), key=key).stdout
    assert f"expires {when}" in got and "verified" in got
    assert (tmp_path / "back.jsonl").read_bytes() == data
    wallet_lines = stack.cli("wallet", key=key).stdout.splitlines()
    assert f"storage    {len(data)} bytes kept, {month:.3g} cents a month" in wallet_lines


def test_a_job_behind_a_running_one_reads_its_place_and_when_it_starts(
    each_stack: StackProcess,
) -> None:
    """The local executor runs one task at a time: a job created behind a running one waits,
    and reads where it stands and an estimate from the running job's progress."""
    stack = each_stack
    key = stack.create_key(f"queue-{secrets.token_hex(3)}")
    spec = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
            "resources": {"budget": 100}}  # fmt: skip
    with httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60) as api:
        first = api.post("/v1/train/jobs", json={**spec, "hyperparameters": {"max_steps": 60}})
        second = api.post("/v1/train/jobs", json={**spec, "hyperparameters": {"max_steps": 2}})
        assert first.status_code == second.status_code == 200, (first.text, second.text)
        running, waiting = first.json()["id"], second.json()["id"]
        try:
            # A job just made waits for an executor: it says where it stands at once.
            assert second.json()["queue"]["position"] >= 1
            wait_for_job(
                api, running, lambda j: (j.get("progress") or {}).get("step", 0) > 0, timeout=180
            )
            job = api.get(f"/v1/train/jobs/{waiting}").json()
            queue = job["queue"]
            assert job["status"] in ("queued", "preparing") and queue is not None, job
            assert queue["ahead"] == queue["position"] - 1 and queue["total"] >= queue["position"]
            assert queue["basis"] in ("measured", "profile")
            # The running job's remaining steps at its pace, then anything ahead.
            assert 0 < queue["eta_seconds"] < 900, queue
            assert api.get(f"/v1/train/jobs/{running}").json()["queue"] is None
            listed = {j["id"]: j["queue"] for j in api.get("/v1/train/jobs").json()["jobs"]}
            assert listed[running] is None and listed[waiting]["position"] == queue["position"]

            shown = stack.cli("jobs", "get", waiting, key=key)
            assert json.loads(shown.stdout)["queue"]["position"] >= 1
            assert f"queued: position {queue['position']} of " in shown.stderr
            assert ", starts in about " in shown.stderr
        finally:
            for job_id in (waiting, running):
                api.post(f"/v1/train/jobs/{job_id}/cancel", json={})
            for job_id in (waiting, running):
                eventually(
                    lambda job_id=job_id: api.get(f"/v1/train/jobs/{job_id}").json()["status"],
                    lambda status: status in TERMINAL,
                    f"job {job_id} ended",
                    timeout=120,
                )
        ended = api.get(f"/v1/train/jobs/{waiting}").json()
        assert ended["status"] == "cancelled" and ended["queue"] is None
