"""The object store as a local attacker meets it (issue 24, items 2 and 7), through the
README's stack on SQLite and PostgreSQL: SeaweedFS's filer, master, volume and gRPC ports
answer no one but the stack; an object whose bytes are not its sha256 is never read; no
presigned URL reaches a log."""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path

import grpc
import httpx
import pytest

from infra.objectstore import credentials
from services.core.s3 import client as s3_client
from tests.support import StackProcess, bearer, reason, wait_for_job

BUCKET = "trainyard"
TERMINAL = ("succeeded", "failed", "cancelled", "stopped", "rejected")


def rows(tag: str) -> bytes:
    return "".join(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"{tag} {i}"},
                    {"role": "assistant", "content": f"ok {i}"},
                ]
            }
        )
        + "\n"
        for i in range(30)
    ).encode()


def member(stack: StackProcess) -> tuple[str, httpx.Client]:
    org = f"store-{secrets.token_hex(4)}"
    key = stack.create_key(org, "member")
    return org, httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)


def upload(api: httpx.Client, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    grant = api.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl", "sha256": digest, "size": len(data)},
    ).json()
    put = httpx.put(grant["upload"]["url"], content=data, headers=grant["upload"]["headers"])
    assert put.status_code == 200
    assert api.post(f"/v1/train/artifacts/{digest}/confirm", json={}).status_code == 200
    return digest


def downloaded(api: httpx.Client, digest: str) -> bytes:
    one = api.get(f"/v1/train/artifacts/{digest}").json()
    return httpx.get(one["url"]).content


def weed_flags(stack: StackProcess) -> dict[str, str]:
    """`weed`'s ports, read as any local process can: from its command line."""
    pid = stack.info()["pids"]["seaweedfs"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return {k.lstrip("-"): v for k, _, v in (a.partition("=") for a in argv) if v}


def grpc_answers(target: str, credentials: grpc.ChannelCredentials | None = None) -> bool:
    """Whether the filer's gRPC answers one harmless call on `target`."""
    channel = (
        grpc.secure_channel(target, credentials) if credentials else grpc.insecure_channel(target)
    )
    call = channel.unary_unary(
        "/filer_pb.SeaweedFiler/GetFilerConfiguration",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    try:
        call(b"", timeout=5)
        return True
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        return False
    finally:
        channel.close()


def test_seaweedfs_answers_no_one_but_the_stack(each_stack: StackProcess) -> None:
    org, api = member(each_stack)
    data = rows("kept")
    digest = upload(api, data)
    flags = weed_flags(each_stack)
    planted = b"planted in the clear\n"
    with httpx.Client(timeout=10) as http:
        filer = f"http://127.0.0.1:{flags['filer.port']}"
        path = f"{filer}/buckets/{BUCKET}/{org}"
        assert http.get(f"{path}/").status_code == 404  # no listing
        assert http.post(f"{path}/x", files={"file": ("x", planted)}).status_code == 404
        assert http.delete(f"{path}/{digest}").status_code == 404
        assert http.get(f"{path}/{digest}").status_code == 404
        master = f"http://127.0.0.1:{flags['master.port']}"
        for call in ("/dir/assign", f"/col/delete?collection={BUCKET}", "/vol/grow?count=1"):
            assert http.get(master + call).status_code == 404, call
        volume = f"http://127.0.0.1:{flags['volume.port']}"
        for fid in ("1,0123456789", "3,0123456789"):  # without the JWT the master signs
            assert http.post(f"{volume}/{fid}", files={"file": ("x", planted)}).status_code == 401
            assert http.delete(f"{volume}/{fid}").status_code == 401
            assert http.get(f"{volume}/{fid}").status_code == 401
    # No filer HTTP socket is left in /tmp for a local process to use instead.
    assert not Path(f"/tmp/seaweedfs-filer-{flags['filer.port']}.sock").exists()
    # Its gRPC takes only the stack's client certificate, on TCP and on its /tmp socket.
    grpc_port = flags["filer.port.grpc"]
    assert not grpc_answers(f"127.0.0.1:{grpc_port}")
    assert not grpc_answers(f"127.0.0.1:{grpc_port}", grpc.ssl_channel_credentials())
    assert not grpc_answers(f"unix:/tmp/seaweedfs-filer-grpc-{grpc_port}.sock")
    # S3 still serves the stack: the object is whole, a new one goes in and reads back.
    assert downloaded(api, digest) == data
    again = rows("another")
    assert downloaded(api, upload(api, again)) == again


@pytest.fixture
def planted(each_stack: StackProcess) -> tuple[httpx.Client, str]:
    """An uploaded dataset whose stored bytes were then replaced in the clear, with the
    stack's own S3 admin credentials (read as infra reads them)."""
    org, api = member(each_stack)
    digest = upload(api, rows("original"))
    access, secret, _ = credentials(each_stack.home)
    s3 = s3_client(each_stack.info()["s3_endpoint"], access, secret)
    s3.put_object(Bucket=BUCKET, Key=f"{org}/{digest}", Body=rows("planted"))
    return api, digest


def test_an_object_whose_bytes_are_not_its_sha256_is_never_read(
    each_stack: StackProcess, planted: tuple[httpx.Client, str], tmp_path: Path
) -> None:
    api, digest = planted
    body = {"base_model": "fixture-tiny-llm", "dataset": {"uri": f"artifact:{digest}"}}
    for call in ("/v1/train/jobs", "/v1/train/estimate"):
        refused = api.post(call, json=body)
        assert refused.status_code == 409 and reason(refused) == "artifact_mismatch", call
        assert digest not in refused.text and "planted" not in refused.text
    assert api.get("/v1/train/jobs").json().get("total_size", 0) == 0
    # A download checks it too (the SDK's, the CLI's, an executor's): nothing is kept.
    key = api.headers["authorization"].removeprefix("Bearer ")
    target = tmp_path / "rows.jsonl"
    got = each_stack.cli("artifacts", "get", digest, "-o", str(target), key=key, check=False)
    assert got.returncode != 0 and "ARTIFACT_MISMATCH" in got.stderr
    assert not target.exists()


def test_no_presigned_url_reaches_a_log(each_stack: StackProcess) -> None:
    """Uploads, downloads, a snapshot kept by JobService and a job trained, uploaded and
    downloaded by the local executor: every presigned URL stays out of every log."""
    _, api = member(each_stack)
    digest = upload(api, rows("logged"))
    assert downloaded(api, digest) == rows("logged")
    job = api.post(
        "/v1/train/jobs",
        json={
            "base_model": "fixture-tiny-llm",
            "dataset": {"uri": f"artifact:{digest}"},
            "hyperparameters": {"max_steps": 1},
            "resources": {"budget": 100},
        },
    )
    assert job.status_code == 200, job.text
    ended = wait_for_job(api, job.json()["id"], lambda j: j["status"] in TERMINAL, timeout=600)
    assert ended["status"] == "succeeded", ended.get("failure_code")
    logs = [each_stack.log_path, *(each_stack.home / "seaweedfs" / "logs").iterdir()]
    for log in logs:
        text = log.read_text(errors="replace")
        assert "X-Amz-Signature" not in text and "X-Amz-Credential" not in text, log.name
