"""Artifacts as a user meets them: REST through Envoy with real SeaweedFS, and the CLI."""

from __future__ import annotations

import hashlib
import json
import secrets

import httpx

from tests.support import StackProcess, reason

ROWS = "".join(
    json.dumps(
        {
            "messages": [
                {"role": "user", "content": f"ping {i}"},
                {"role": "assistant", "content": f"pong {i}"},
            ]
        }
    )
    + "\n"
    for i in range(30)
).encode()


def upload(api: httpx.Client, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    grant = api.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl", "sha256": digest, "size": len(data)},
    )
    assert grant.status_code == 200, grant.text
    body = grant.json()
    assert body["sha256"] == digest
    if not body["stored"]:
        assert body["upload"]["method"] == "PUT"
        put = httpx.put(body["upload"]["url"], content=data, headers=body["upload"]["headers"])
        assert put.status_code == 200
    confirmed = api.post(f"/v1/train/artifacts/{digest}/confirm", json={})
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "stored"
    return digest


def test_upload_list_download_and_delete_over_rest(api: httpx.Client) -> None:
    digest = upload(api, ROWS)
    again = api.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "x", "sha256": digest, "size": len(ROWS)},
    )
    assert again.json()["stored"] is True
    listed = api.get("/v1/train/artifacts").json()
    assert [a["sha256"] for a in listed["artifacts"]] == [digest] and listed["total_size"] == 1
    assert listed["artifacts"][0]["expires_at"].endswith("Z")
    one = api.get(f"/v1/train/artifacts/{digest}").json()
    # The URL alone downloads: no key headers, no API key.
    assert "headers" not in one and httpx.get(one["url"]).content == ROWS
    gone = api.delete(f"/v1/train/artifacts/{digest}")
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert api.get(f"/v1/train/artifacts/{digest}").status_code == 404


def test_a_job_on_an_uploaded_dataset_over_rest(api: httpx.Client) -> None:
    digest = upload(api, ROWS)
    job = api.post(
        "/v1/train/jobs",
        json={
            "base_model": "fixture-tiny-llm",
            "dataset": {"uri": f"artifact:{digest}"},
            "resources": {"machines": ["nowhere"]},  # parked: it stays a reader of the upload
        },
    )
    assert job.status_code == 200, job.text
    assert job.json()["train_examples"] == 30
    busy = api.delete(f"/v1/train/artifacts/{digest}")
    assert busy.status_code == 409 and reason(busy) == "in_use"
    unknown = "0" * 64
    refused = api.post(
        "/v1/train/jobs",
        json={"base_model": "fixture-tiny-llm", "dataset": {"uri": f"artifact:{unknown}"}},
    )
    assert refused.status_code == 400 and reason(refused) == "invalid_request"


def test_another_orgs_sha256_answers_exactly_as_an_unknown_one(
    api: httpx.Client, stack: StackProcess, member_key: str
) -> None:
    unique = {"messages": [{"role": "user", "content": secrets.token_hex(4)}]}
    digest = upload(api, ROWS + json.dumps(unique).encode() + b"\n")
    other = httpx.Client(base_url=stack.url, headers={"authorization": f"Bearer {member_key}"})
    foreign, unknown = (
        other.get(f"/v1/train/artifacts/{digest}"),
        other.get(f"/v1/train/artifacts/{'1' * 64}"),
    )
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json()


def test_the_cli_uploads_lists_downloads_and_removes(stack: StackProcess, tmp_path) -> None:  # type: ignore[no-untyped-def]
    key = stack.create_key(f"cli-{secrets.token_hex(3)}", "member")
    source = tmp_path / "rows.jsonl"
    source.write_bytes(ROWS)
    digest = hashlib.sha256(ROWS).hexdigest()
    assert stack.cli("artifacts", "upload", str(source), key=key).stdout.startswith(
        f"{digest}  {len(ROWS)} bytes  stored"
    )
    assert digest in stack.cli("artifacts", "ls", key=key).stdout
    target = tmp_path / "back.jsonl"
    assert "verified" in stack.cli("artifacts", "get", digest, "-o", str(target), key=key).stdout
    assert target.read_bytes() == ROWS
    assert "deleted" in stack.cli("artifacts", "rm", digest, key=key).stdout
    missing = stack.cli("artifacts", "get", digest, check=False, key=key)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
