"""A client written from HIP-1333 §2–§6 alone, with `httpx` and the seed's own bodies: an
org's executor claims over REST, reports as §5 shows (no sequence numbers), stores its
output under a §6 grant, and the owner reads the job, its artifacts and the bytes back."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import math
import secrets
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from playwright.sync_api import Page, expect, sync_playwright

from gateway.openapi import OUTPUT as OPENAPI
from infra.objectstore import credentials
from services.artifacts.downloads import DownloadTokens, Ticket
from services.core import keys
from services.core.s3 import client as s3_client
from services.core.store import open_store
from services.jobs.store import DataSourceRow
from tests.e2e import test_console as console
from tests.support import BIN, StackProcess, bearer, eventually, reason, wait_for_job
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")


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
    assert read["result"]["size"] == len(output) and read["model_available"] is True
    assert sha256 in [a["sha256"] for a in read["artifacts"]]
    nll = owner.get(f"/v1/train/jobs/{job['id']}/metrics").json()["series"]
    assert [(s["name"], [p["step"] for p in s["points"]]) for s in nll] == [("nll", [100])]
    one = owner.get(f"/v1/train/artifacts/{sha256}").json()
    body = httpx.get(one["url"], timeout=60).content
    assert hashlib.sha256(body).hexdigest() == sha256
    # A report once the job has ended records nothing and answers its status (§5).
    late = machine.post(events, json={**lease, "events": [metric]})
    assert late.status_code == 200 and late.json()["status"] == "succeeded"
    # 002: a failed or cancelled job may be retried, a succeeded one not, as the contract says.
    again = owner.post(
        f"/v1/train/jobs/{job['id']}/retry", json={}, headers={"Idempotency-Key": "r1"}
    )
    assert again.status_code == 409 and reason(again) == "invalid_transition"
    retry = json.loads(OPENAPI.read_text())["paths"]["/v1/train/jobs/{id}/retry"]["post"]
    assert (
        "`failed` or `cancelled`" in retry["description"]
        and "`succeeded` included" in retry["description"]
    )


# -- issue 26 item 6: s3:// and hf:// datasets ------------------------------------------------

PARKED_LORA = {"base_model": "fixture-tiny-llm", "resources": {"machines": ["nowhere"]},
               "output": {"kind": "checkpoint"}}  # fmt: skip


def chat_rows(prefix: str, count: int = 12) -> bytes:
    return b"".join(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"{prefix} question {i}"},
                    {"role": "assistant", "content": f"{prefix} answer {i}"},
                ]
            }
        ).encode()
        + b"\n"
        for i in range(count)
    )


def snapshot_contents(client: httpx.Client, job_id: str) -> set[str]:
    page = client.get(f"/v1/train/jobs/{job_id}/dataset", params={"limit": 200}).json()
    return {item["messages"][0]["content"] for item in page["items"]}


def verified(client: httpx.Client, job_id: str) -> dict:  # type: ignore[type-arg]
    return eventually(
        lambda: client.get(f"/v1/train/jobs/{job_id}").json(),
        lambda job: job["preparation"]["status"] == "verified",
        "the snapshot",
    )


def retried_after_cancel(client: httpx.Client, job_id: str) -> dict:  # type: ignore[type-arg]
    assert client.post(f"/v1/train/jobs/{job_id}/cancel", json={}).status_code == 200
    retry = client.post(
        f"/v1/train/jobs/{job_id}/retry", json={}, headers={"Idempotency-Key": "again"}
    )
    assert retry.status_code == 200, retry.text
    return client.get(f"/v1/train/jobs/{job_id}").json()


def refused_unread(answer: httpx.Response, category: str, *never: str) -> None:
    """A dataset the source would not give: 400 on `dataset.uri`, its category, and nothing
    of what was named or sent."""
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["code"] == "invalid_request" and body["fields"] == ["dataset.uri"]
    assert category in answer.text
    for value in never:
        assert value not in answer.text


def test_an_s3_dataset_reads_through_the_orgs_data_source_and_is_frozen(
    each_stack: StackProcess,
) -> None:
    """`003_…` §3's `s3://<bucket>/<key>`, from a bucket of the stack's SeaweedFS that the
    artifacts never use, read with credentials the org registered. SeaweedFS reads its S3
    identities once at start (`-s3.config`) and its IAM API is read-only, so the test
    cannot mint a key for that bucket alone: the org registers the stack's own."""
    access, secret, _ = credentials(each_stack.home)
    endpoint = each_stack.info()["s3_endpoint"]
    bucket = f"ext-{secrets.token_hex(4)}"
    outside = s3_client(endpoint, access, secret)
    outside.create_bucket(Bucket=bucket)
    first = chat_rows("first")
    outside.put_object(Bucket=bucket, Key="data/rows.jsonl", Body=first)
    org = f"src-{secrets.token_hex(3)}"
    client = httpx.Client(base_url=each_stack.url, headers=bearer(each_stack.create_key(org)))
    source = {"name": "lake", "endpoint": endpoint, "region": "us-east-1",
              "access_key_id": access, "secret_access_key": secret}  # fmt: skip

    made = client.post("/v1/train/data-sources", json=source)
    assert made.status_code == 200, made.text
    assert set(made.json()) == {"name", "endpoint", "region", "create_time"}
    listed = client.get("/v1/train/data-sources")
    assert [s["name"] for s in listed.json()["data_sources"]] == ["lake"]
    assert client.post("/v1/train/data-sources", json=source).status_code == 409
    for answer in (made, listed):
        assert access not in answer.text and secret not in answer.text
    # Kept sealed: neither the store nor the stack's log holds the secret.
    store = open_store(each_stack.database_url, run_migrations=False)
    try:
        with store.unit(write=False) as session:
            sealed = session.get(DataSourceRow, (org, "lake")).sealed  # type: ignore[union-attr]
    finally:
        store.dispose()
    assert secret.encode() not in sealed and access.encode() not in sealed

    uri = f"s3://{bucket}/data/rows.jsonl"
    created = client.post(
        "/v1/train/jobs", json={**PARKED_LORA, "dataset": {"uri": uri, "source": "lake"}}
    )
    assert created.status_code == 200, created.text
    dataset = created.json()["dataset"]
    assert dataset["source_sha256"] == hashlib.sha256(first).hexdigest()
    assert dataset["resolved_revision"]  # the object's ETag, as read
    job_id = created.json()["id"]
    assert len(snapshot_contents(client, verified(client, job_id)["id"])) == 12

    # The source changes; the job's retry reads the snapshot, never the new bytes.
    outside.put_object(Bucket=bucket, Key="data/rows.jsonl", Body=chat_rows("second"))
    again = retried_after_cancel(client, job_id)
    assert again["dataset"] == dataset
    assert snapshot_contents(client, job_id) == {f"first question {i}" for i in range(12)}

    # What the source refuses is refused at create, naming none of it.
    wrong = {**source, "name": "wrong", "secret_access_key": "not-" + secret[4:]}
    assert client.post("/v1/train/data-sources", json=wrong).status_code == 200
    for name, key, category in (("wrong", "data/rows.jsonl", "credentials"),
                                ("lake", "data/missing.jsonl", "not_found")):  # fmt: skip
        refused_unread(
            client.post("/v1/train/jobs", json={**PARKED_LORA, "dataset": {
                "uri": f"s3://{bucket}/{key}", "source": name}}),
            category, bucket, key, endpoint, access, wrong["secret_access_key"],
        )  # fmt: skip
    gone = client.delete("/v1/train/data-sources/lake")
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    unknown = client.post(
        "/v1/train/jobs", json={**PARKED_LORA, "dataset": {"uri": uri, "source": "lake"}}
    )
    assert unknown.status_code == 400 and unknown.json()["fields"] == ["dataset.source"]
    assert secret not in each_stack.log_path.read_text(errors="replace")


def hub_cache_commit(cache: Path, repo: str, ref: str, files: dict[str, bytes]) -> str:
    """A commit of a Hub dataset repository in huggingface_hub's cache layout
    (`datasets--<owner>--<name>/refs/<ref>`, `snapshots/<commit>/<file>`), as a download
    of it would have left it; `ref` then points at it."""
    commit = secrets.token_hex(20)
    root = cache / f"datasets--{repo.replace('/', '--')}"
    for name, data in files.items():
        path = root / "snapshots" / commit / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / ref).write_text(commit)
    return commit


def test_an_hf_dataset_reads_a_pinned_commit_from_the_hub_cache(stack: StackProcess) -> None:
    """`003_…` §3's `hf://` through huggingface_hub, offline (`HF_HUB_OFFLINE=1`) from the
    cache the stack is given (`HF_HUB_CACHE`), built here as the Hub client builds it."""
    repo = f"acme/support-{secrets.token_hex(3)}"
    first = chat_rows("hub")
    commit = hub_cache_commit(stack.hf_cache, repo, "main", {"train/rows.jsonl": first})
    client = stack.member_client()

    uri = f"hf://datasets/{repo}@main/train/rows.jsonl"
    created = client.post("/v1/train/jobs", json={**PARKED_LORA, "dataset": {"uri": uri}})
    assert created.status_code == 200, created.text
    dataset = created.json()["dataset"]
    assert dataset["resolved_revision"] == commit
    assert dataset["source_sha256"] == hashlib.sha256(first).hexdigest()
    job_id = verified(client, created.json()["id"])["id"]

    # `main` moves on; the job keeps the commit it was created on.
    hub_cache_commit(stack.hf_cache, repo, "main", {"train/rows.jsonl": chat_rows("moved")})
    assert retried_after_cancel(client, job_id)["dataset"] == dataset
    assert snapshot_contents(client, job_id) == {f"hub question {i}" for i in range(12)}

    # Offline, what the cache does not hold cannot be read: refused at create.
    for missing in (f"hf://datasets/{repo}@v9/train/rows.jsonl",
                    f"hf://datasets/{repo}/train/other.jsonl",
                    "hf://datasets/acme/never-cached/rows.jsonl"):  # fmt: skip
        answer = client.post("/v1/train/jobs", json={**PARKED_LORA, "dataset": {"uri": missing}})
        refused_unread(answer, "unreachable", repo, "never-cached", "other.jsonl")


# -- issue 26 item 5: refused at create, not late -------------------------------------------

DECIDER = {"base_model": "fixture-tiny-decider", "dataset": {"uri": "fixture:decisions-tiny-v1"}}


def test_what_no_executor_runs_is_refused_at_create_naming_the_field(
    each_stack: StackProcess,
) -> None:
    org = f"seed-{secrets.token_hex(3)}"
    owner = httpx.Client(base_url=each_stack.url, headers=bearer(each_stack.create_key(org)))
    refusals = [
        # §3's example shape: a decision job across two linked machines.
        ({**DECIDER, "resources": {"machines": ["gpu-1", "gpu-2"]}}, "resources.machines"),
        (
            {**DECIDER, "dataset": {**DECIDER["dataset"], "splits": {"train": "train"}}},
            "dataset.splits",
        ),
        (
            {**DECIDER, "hyperparameters": {"base_load_precision": "bf16"}},
            "hyperparameters.base_load_precision",
        ),
    ]
    for body, field in refusals:
        refused = owner.post("/v1/train/jobs", json=body)
        assert refused.status_code == 400 and reason(refused) == "invalid_request"
        assert refused.json()["fields"] == [field]
    assert owner.get("/v1/train/jobs").json().get("jobs", []) == []
    # §4: the models list answers the same bound from the code that refused it.
    models = {m["name"]: m for m in owner.get("/v1/train/models").json()["models"]}
    assert models["fixture-tiny-decider"]["support"]["machines"] == 1
    assert models["fixture-tiny-decider"]["support"]["base_load_precisions"] == ["fp32"]


def test_a_protected_job_is_offered_only_to_an_executor_that_declares_it(
    each_stack: StackProcess,
) -> None:
    org = f"seed-{secrets.token_hex(3)}"
    owner = httpx.Client(base_url=each_stack.url, headers=bearer(each_stack.create_key(org)))
    machine = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(org, "executor")), timeout=60
    )
    protect = {"suites": ["sentiment"], "projection": {"strength": 0.5}, "distillation": True}
    job = owner.post(
        "/v1/train/jobs",
        json={**DECIDER, "protect": protect, "resources": {"machines": ["gpu-9"]}},
    ).json()
    claim = {"machine": "gpu-9", "platform": False, "bases": ["fixture-tiny-decider"],
             "devices": ["cpu"], "wait": 1,
             "supports": {"adaptations": ["full", "readout"], "outputs": ["capability"]}}  # fmt: skip
    assert machine.post("/v1/train/jobs/claim", json=claim).status_code == 204
    claim["supports"]["protect"] = ["projection", "distillation"]  # type: ignore[index]
    claimed = machine.post("/v1/train/jobs/claim", json=claim)
    assert claimed.status_code == 200 and claimed.json()["task"]["job"] == job["id"]
    owner.post(f"/v1/train/jobs/{job['id']}/cancel", json={})


# -- issue 26 item 14: client calls have an ETA and a deadline ------------------------------


def test_a_client_call_past_its_deadline_fails_plainly_and_waiting_calls_carry_an_eta(
    each_stack: StackProcess,
) -> None:
    org = f"seed-{secrets.token_hex(3)}"
    member = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(org)), timeout=90
    )
    operator = httpx.Client(
        base_url=each_stack.url,
        headers={**bearer(each_stack.create_key("ops", "operator")), "x-org-id": org},
        timeout=90,
    )
    created = operator.post("/v1/train/clients", json={"base_model": "fixture-tiny-llm"})
    assert created.status_code == 200, created.text
    calls = f"/v1/train/clients/{created.json()['id']}"
    step = {"data": [{"model_input": {"text": "the quick brown fox"}}]}
    try:
        # Before any call has been answered there is no estimate, rather than a guess.
        early = member.post(f"{calls}/forward_backward", json={"seq": 2, "wait": 0, **step})
        assert early.status_code == 202 and early.json()["status"] == "queued"
        assert "eta_seconds" not in early.json()
        out = member.post(f"{calls}/forward_backward", json={"seq": 1, **step})
        assert out.status_code == 200 and out.json()["status"] == "done"
        bad = member.post(f"{calls}/optim_step", json={"seq": 3, "deadline_seconds": 0})
        assert bad.status_code == 400 and bad.json()["fields"] == ["deadline_seconds"]
        # Queued behind call 3, which has not come: it waits, with an estimate.
        late = member.post(
            f"{calls}/forward_backward", json={"seq": 4, "wait": 0, "deadline_seconds": 1, **step}
        )
        assert late.status_code == 202
        future = late.json()
        assert future["status"] == "queued" and future["deadline_time"]
        assert isinstance(future["eta_seconds"], int | float) and future["eta_seconds"] > 0
        ended = member.get(f"/v1/train/futures/{future['id']}", params={"wait": 60}).json()
        assert ended["status"] == "failed" and "eta_seconds" not in ended
        assert (ended["error"]["code"], ended["error"]["message"]) == (
            "DEADLINE_EXCEEDED",
            "The call did not start within its deadline_seconds.",
        )
        # Its turn passed it by: the calls around it run, and it never does.
        for seq, kind, body in ((3, "optim_step", {}), (5, "forward_backward", step)):
            ran = member.post(f"{calls}/{kind}", json={"seq": seq, **body})
            assert ran.status_code == 200 and ran.json()["status"] == "done", ran.text
        history = member.get(calls).json()["loss_history"]
        assert [p["seq"] for p in history] == [1, 2, 5]
    finally:
        member.delete(calls)


# -- issue 26 item 7: a stable eval split ---------------------------------------------------


def chats(first: int, last: int) -> bytes:
    """Chat rows `first` to `last - 1`, each with an `id` of its own."""
    return b"".join(
        json.dumps({"id": f"chat-{i}", "messages": [{"role": "user", "content": f"q {i}"},
                                                    {"role": "assistant", "content": f"a {i}"}]}
                   ).encode() + b"\n"
        for i in range(first, last)
    )  # fmt: skip


def upload_dataset(client: httpx.Client, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    grant = client.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl", "sha256": digest, "size": len(data)},
    )
    assert grant.status_code == 200, grant.text
    if not grant.json()["stored"]:
        upload = grant.json()["upload"]
        assert httpx.put(upload["url"], content=data, headers=upload["headers"]).status_code == 200
    confirmed = client.post(f"/v1/train/artifacts/{digest}/confirm", json={})
    assert confirmed.status_code == 200, confirmed.text
    return digest


def held_out_ids(client: httpx.Client, digest: str) -> set[str]:
    """The examples a job on the uploaded rows holds out, read from its frozen snapshot."""
    job = client.post(
        "/v1/train/jobs",
        json={"base_model": "fixture-tiny-llm", "dataset": {"uri": f"artifact:{digest}"},
              "resources": {"machines": ["nowhere"]}},  # parked: prepared, never claimed
    )  # fmt: skip
    assert job.status_code == 200, job.text
    job_id = job.json()["id"]
    wait_for_job(client, job_id, lambda j: (j.get("preparation") or {}).get("status") == "verified")
    ids: set[str] = set()
    offset: int | None = 0
    while offset is not None:
        page = client.get(
            f"/v1/train/jobs/{job_id}/dataset",
            params={"split": "eval", "offset": offset, "limit": 200},
        ).json()
        ids |= {item["id"] for item in page["items"]}
        offset = page.get("next_offset") if page["has_more"] else None
    assert len(ids) == job.json()["eval_examples"]
    client.post(f"/v1/train/jobs/{job_id}/cancel", json={})
    return ids


def test_a_growing_dataset_keeps_every_example_on_its_side(each_stack: StackProcess) -> None:
    # `002_…`: an example's split follows from its identity; rows added later take the side
    # theirs gives them and nothing already placed changes side.
    key = each_stack.create_key(f"grow-{secrets.token_hex(3)}")
    owner = httpx.Client(base_url=each_stack.url, headers=bearer(key), timeout=60)
    rows, before = 200, held_out_ids(owner, upload_dataset(owner, chats(0, 200)))
    assert before
    for size in (201, 450, 1200):
        after = held_out_ids(owner, upload_dataset(owner, chats(0, size)))
        placed = {f"chat-{i}" for i in range(rows)}
        assert after & placed == before, f"an example changed side at {size} rows"
        rows, before = size, after


# -- issue 26 item 8: the estimate answers `is_trainable` ----------------------------------


def test_the_estimate_reports_an_unusable_selection_a_create_refuses(
    each_stack: StackProcess,
) -> None:
    # `002_…`: the estimate answers `is_trainable: false` for an unusable selection, with
    # the counts; the create of the same spec refuses it (422) and makes nothing.
    key = each_stack.create_key(f"est-{secrets.token_hex(3)}")
    owner = httpx.Client(base_url=each_stack.url, headers=bearer(key), timeout=60)
    silent = b"".join(
        json.dumps({"messages": [{"role": "user", "content": f"q {i}"},
                                 {"role": "assistant", "content": " "}]}).encode() + b"\n"
        for i in range(5)
    )  # fmt: skip
    spec = {"base_model": "fixture-tiny-llm",
            "dataset": {"uri": f"artifact:{upload_dataset(owner, silent)}"},
            "resources": {"machines": ["nowhere"]}}  # fmt: skip
    estimate = owner.post("/v1/train/estimate", json=spec)
    assert estimate.status_code == 200, estimate.text
    assert estimate.json()["dataset"] == {
        "selected_chats": 5, "selected_messages": 10, "trainable_chats": 0,
        "nonempty_text_messages": 5, "is_trainable": False, "reasons": ["TRAINING_DATASET_UNUSABLE"],
    }  # fmt: skip
    created = owner.post("/v1/train/jobs", json=spec)
    assert created.status_code == 422 and reason(created) == "training_dataset_unusable"
    assert owner.get("/v1/train/jobs").json()["jobs"] == []
    # The same rows with the whole sequence trained on have text to learn: trainable.
    whole = owner.post(
        "/v1/train/estimate", json={**spec, "objective": {"loss_mask": "full_sequence"}}
    )
    assert whole.status_code == 200
    assert (
        whole.json()["dataset"]["is_trainable"] is True and whole.json()["dataset"]["reasons"] == []
    )


# -- issue 26 item 10: a job's events stop at their cap, metric points included ----------------


def test_a_job_keeps_no_more_events_than_its_cap_and_still_ends(tmp_path: Path) -> None:
    # A cap of 30 (100,000 by default) on a stack of its own, reached by an org's executor
    # reporting over REST as HIP-1333 §5 shows.
    env = {"TRAINYARD_LOCAL_EXECUTOR": "0", "TRAINYARD_MAX_JOB_EVENTS": "30"}
    stack = StackProcess(tmp_path / "home", env=env).start()
    try:
        owner = httpx.Client(
            base_url=stack.url, headers=bearer(stack.create_key("cap")), timeout=60
        )
        machine = httpx.Client(
            base_url=stack.url, headers=bearer(stack.create_key("cap", "executor")), timeout=60
        )
        job = owner.post(
            "/v1/train/jobs",
            json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                  "resources": {"machines": ["gpu-0"]}},
        ).json()  # fmt: skip
        claim = {"machine": "gpu-0", "bases": ["fixture-tiny-llm"], "devices": ["cpu"],
                 "supports": {"adaptations": ["full", "lora"], "outputs": ["checkpoint", "lora"]}}  # fmt: skip
        task = machine.post("/v1/train/jobs/claim", json=claim).json()["task"]
        lease = {"task": task["id"], "lease": task["lease"]}
        events = f"/v1/train/jobs/{job['id']}/events"

        def report(*sent: dict[str, Any]) -> None:
            answer = machine.post(events, json={**lease, "events": list(sent)})
            assert answer.status_code == 200, answer.text

        report({"type": "status", "status": "running"})
        for step in range(1, 41):
            report({"type": "metric", "name": "loss", "step": step, "value": 1 / step},
                   {"type": "log", "line": f"step {step}"})  # fmt: skip
        report({"type": "status", "status": "failed", "error": "trainer_failed"})
        read = owner.get(events, params={"page_size": 1000}).json()["events"]
        kept = [e for e in read if e["type"] in ("log", "metric")]
        # The record filled to its cap and no further (its first six are the job's own
        # moves); the run's end was still kept past it.
        assert max(e["seq"] for e in kept) == 30
        assert [(e["type"], e["status"]) for e in read[-2:]] == [
            ("attempt", "failed"),
            ("transition", "failed"),
        ]
        assert owner.get(f"/v1/train/jobs/{job['id']}").json()["status"] == "failed"
        # A metric point past the cap is in neither the events nor the series.
        steps = [e["step"] for e in kept if e["type"] == "metric"]
        series = owner.get(f"/v1/train/jobs/{job['id']}/metrics").json()["series"]
        points = [p["step"] for s in series if s["name"] == "loss" for p in s["points"]]
        assert points == steps == list(range(1, 13))
    finally:
        stack.stop()


# -- issue 26 item 12: nothing charged before anything ran ---------------------------------


def test_a_job_cancelled_while_its_executor_loads_costs_nothing(each_stack: StackProcess) -> None:
    # `002_…`: nothing ran, nothing is charged. The org's executor (the seed's REST wire)
    # claims, says it accepted and loads; the owner cancels before its trainer runs.
    org = f"load-{secrets.token_hex(3)}"
    owner = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(org)), timeout=60
    )
    machine = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(org, "executor")), timeout=60
    )
    job = owner.post(
        "/v1/train/jobs",
        json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
              "hyperparameters": {"max_steps": 2}, "resources": {"machines": ["loader"]}},
    ).json()  # fmt: skip
    claim = {"machine": "loader", "platform": False, "bases": ["fixture-tiny-llm"],
             "devices": ["cpu"], "supports": {"adaptations": ["full", "lora"],
                                              "outputs": ["checkpoint", "lora"]}}  # fmt: skip
    task = machine.post("/v1/train/jobs/claim", json=claim).json()["task"]
    assert task["job"] == job["id"]
    report = f"/v1/train/jobs/{job['id']}/events"
    lease = {"task": task["id"], "lease": task["lease"]}
    accepted = {**lease, "events": [{"type": "status", "status": "accepted"}]}
    assert machine.post(report, json=accepted).status_code == 200
    time.sleep(2)  # the executor loads its base and data: seconds a claim-metered task paid
    assert owner.post(f"/v1/train/jobs/{job['id']}/cancel", json={}).status_code == 200
    asked = machine.post(report, json={**lease, "events": []}).json()
    assert asked["cancel"] is True
    stopped = {**lease, "events": [{"type": "status", "status": "cancelled"}]}
    assert machine.post(report, json=stopped).json()["status"] == "cancelled"

    done = owner.get(f"/v1/train/jobs/{job['id']}").json()
    assert done["status"] == "cancelled" and float(done["cost_credits"]) == 0
    assert done["timing"]["metered_device_seconds"] == 0
    assert not done.get("holding") or not int(done["holding"].get("device_seconds", 0))
    (attempt,) = owner.get(f"/v1/train/jobs/{job['id']}/attempts").json()["attempts"]
    assert attempt["status"] == "cancelled" and attempt.get("started_time") is None
    assert owner.get("/v1/train/wallet").json().get("holds", []) == []


def test_a_job_that_trains_is_charged_only_its_running_seconds(each_stack: StackProcess) -> None:
    # The stack's own executor trains a job the platform runs: the seconds charged are
    # those from the trainer's `running` to the end, never its claim or its loading.
    key = each_stack.create_key(f"run-{secrets.token_hex(3)}")
    owner = httpx.Client(base_url=each_stack.url, headers=bearer(key), timeout=60)
    job = owner.post(
        "/v1/train/jobs",
        json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
              "hyperparameters": {"max_steps": 2}, "resources": {"budget": 100}},
    ).json()  # fmt: skip
    done = wait_for_job(owner, job["id"], lambda j: j["status"] in ENDED)
    assert done["status"] == "succeeded"
    (attempt,) = owner.get(f"/v1/train/jobs/{job['id']}/attempts").json()["attempts"]
    leased, started, ended = (
        dt.datetime.fromisoformat(attempt[name].replace("Z", "+00:00"))
        for name in ("leased_time", "started_time", "end_time")
    )
    assert leased < started < ended
    metered = done["timing"]["metered_device_seconds"]
    # One CPU device, from its `running` to its last report: never the claim or the load.
    assert metered <= math.ceil((ended - started).total_seconds())
    assert done["timing"]["charged_device_seconds"] == metered
    assert float(done["cost_credits"]) > 0  # its amount: tests/integration/test_money.py


# -- issue 26 item 9: per-attempt logs ------------------------------------------------------


@contextlib.contextmanager
def crashing_executor(
    stack: StackProcess, org: str, machine: str, home: Path, crash_after: Path
) -> Iterator[None]:
    """An executor of the org's own on `machine`, as `trainyard executor` runs, whose
    scripted trainer writes a line a step on stderr and dies of an exception at step 3 once
    `crash_after` exists."""
    env = {
        **stack.env,
        "TRAINYARD_HOME": str(home),
        "TRAINYARD_URL": stack.url,
        "TRAINYARD_API_KEY": stack.create_key(org, "executor"),
        "SCRIPTED_CRASH_AT_STEP": "3",
        "SCRIPTED_CRASH_AFTER": str(crash_after),
    }
    argv = [str(BIN / "trainyard"), "executor", "--machine", machine,
            "--trainer", "executor.scripted", "--no-warm"]  # fmt: skip
    home.mkdir(parents=True)
    with open(home / "executor.log", "ab") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.terminate()
        process.wait(60)


def follow(owner: httpx.Client, path: str) -> str:
    """An attempt's log read as a follower reads it, by long polls from offset 0 until the
    attempt ends."""
    answers: list[dict[str, Any]] = []
    offset = 0
    while not answers or not answers[-1]["complete"] or offset < answers[-1]["size"]:
        got = owner.get(path, params={"offset": offset, "wait": 25})
        assert got.status_code == 200, got.text
        answers.append(got.json())
        offset = answers[-1]["next_offset"]
    return "".join(a["text"] for a in answers)


LAST_WORDS = "RuntimeError: scripted crash at step 3\n"


def test_a_crashed_trainers_traceback_is_its_attempts_log(
    each_stack: StackProcess, tmp_path: Path
) -> None:
    stack, org = each_stack, f"logs-{secrets.token_hex(3)}"
    key = stack.create_key(org)
    owner = httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)
    machine, crash_after = f"crash-{secrets.token_hex(3)}", tmp_path / "crash-now"
    with crashing_executor(stack, org, machine, tmp_path / "executor", crash_after):
        job = owner.post(
            "/v1/train/jobs",
            json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                  "hyperparameters": {"max_steps": 6}, "resources": {"machines": [machine]}},
        ).json()  # fmt: skip
        logs = f"/v1/train/jobs/{job['id']}/attempts/1/logs"
        # Followed while the trainer runs: its lines come before it ends.
        seen = eventually(
            lambda: owner.get(logs, params={"tail_lines": 5}).json(),
            lambda log: "step 3/6" in log["text"],
            "the trainer's third step in its log",
        )
        assert seen["complete"] is False and seen["status"] in ("leased", "accepted", "started")
        crash_after.touch()
        text = follow(owner, logs)
        assert text.startswith("step 1/6 loss ") and text.endswith(LAST_WORDS)
        assert "Traceback (most recent call last):" in text
        done = wait_for_job(owner, job["id"], lambda j: j["status"] == "failed")
        (first,) = owner.get(f"/v1/train/jobs/{job['id']}/attempts").json()["attempts"]
        assert first["failure_code"] == "trainer_failed"
        assert "/attempts/{attempt}/logs" in first["failure_message"], done
        # The job says what the trainer died of: the exception its log ends with.
        assert done["failure_message"].endswith(LAST_WORDS.strip()), done
        assert first["failure_message"] == done["failure_message"]

        # The tail, a byte range and a line range, each placed in the whole.
        size = len(text.encode())
        assert first["log_bytes"] == size  # the attempts list's log metadata
        tail = owner.get(logs, params={"tail_lines": 1}).json()
        assert tail == {
            "job_id": job["id"], "attempt_number": 1, "status": "failed", "text": LAST_WORDS,
            "offset": size - len(LAST_WORDS), "next_offset": size,
            "first_line": text.count("\n"), "size": size, "start": 0, "complete": True,
        }  # fmt: skip
        head = owner.get(logs, params={"offset": 0, "limit_bytes": 10}).json()
        assert (head["text"], head["next_offset"]) == (text[:10], 10)
        second = owner.get(logs, params={"start_line": 2, "max_lines": 1}).json()
        assert second["text"] == text.splitlines(keepends=True)[1]
        assert second["text"].startswith("step 2/6 ") and second["first_line"] == 2
        # Refusals name the field; an attempt the job does not have is not found.
        mixed = owner.get(logs, params={"offset": 0, "tail_lines": 3})
        assert mixed.status_code == 400 and reason(mixed) == "invalid_request"
        assert "tail_lines" in mixed.text and "offset=0" not in mixed.text
        bad = owner.get(f"/v1/train/jobs/{job['id']}/attempts/first/logs")
        assert bad.status_code == 400 and reason(bad) == "invalid_request"
        missing = owner.get(f"/v1/train/jobs/{job['id']}/attempts/2/logs")
        assert missing.status_code == 404 and reason(missing) == "not_found"
        other = httpx.get(stack.url + logs, headers=bearer(stack.create_key(f"{org}-x")))
        assert other.status_code == 404 and reason(other) == "not_found"

        # The CLI reads the same log, whole and by its tail.
        whole = stack.cli("jobs", "logs", job["id"], "--attempt", "1", key=key)
        assert whole.stdout == text
        assert stack.cli("jobs", "logs", job["id"], "--tail", "1", key=key).stdout == LAST_WORDS

        # A retry is a second attempt with a log of its own, followed by the CLI as it grows.
        crash_after.unlink()
        retried = owner.post(
            f"/v1/train/jobs/{job['id']}/retry", json={}, headers={"Idempotency-Key": "again"}
        )
        assert retried.status_code == 200, retried.text
        attempt = retried.json()["attempt"]
        assert attempt["attempt_number"] == 2
        following = subprocess.Popen(
            [str(BIN / "trainyard"), "jobs", "logs", job["id"], "-f"],
            env={**stack.env, "TRAINYARD_URL": stack.url, "TRAINYARD_API_KEY": key},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert following.stdout is not None
        lines = [following.stdout.readline() for _ in range(3)]
        assert [line.split(" loss ")[0] for line in lines] == ["step 1/6", "step 2/6", "step 3/6"]
        assert following.poll() is None  # still following: the trainer has not ended
        crash_after.touch()
        rest, _ = following.communicate(timeout=120)
        assert following.returncode == 0 and rest.endswith(LAST_WORDS)
        by_id = f"/v1/train/jobs/{job['id']}/attempts/{attempt['id']}/logs"
        again = follow(owner, by_id)
        assert again == "".join(lines) + rest and again.count("Traceback") == 1
        assert follow(owner, logs) == text  # the first attempt's log is as it was


@contextlib.contextmanager
def console_page() -> Iterator[Page]:
    """A page in Debian's chromium, as the console tests drive it; it must throw nothing."""
    assert console.CHROMIUM, "chromium is missing: `apt-get install chromium`"
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=console.CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            opened = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            opened.on("pageerror", lambda exc: errors.append(str(exc)))
            yield opened
        finally:
            browser.close()
    assert not errors, f"the page threw: {errors}"


def test_the_console_shows_an_attempts_log_as_it_grows(stack: StackProcess, tmp_path: Path) -> None:
    org = f"logs-{secrets.token_hex(3)}"
    key = stack.create_key(org)
    owner = httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)
    machine, crash_after = f"crash-{secrets.token_hex(3)}", tmp_path / "crash-now"
    executor = crashing_executor(stack, org, machine, tmp_path / "executor", crash_after)
    with executor, console_page() as browser_page:
        job = owner.post(
            "/v1/train/jobs",
            json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                  "hyperparameters": {"max_steps": 6}, "resources": {"machines": [machine]}},
        ).json()  # fmt: skip
        console.sign_in(browser_page, stack, key)
        browser_page.locator(f"#jobs tr[data-job='{job['id']}'] a").click()
        log = browser_page.locator("#attempt-log")
        # The trainer waits at its third step: the panel shows its lines while it runs.
        expect(log).to_contain_text("step 3/6", timeout=60_000)
        expect(browser_page.locator("#log-size")).to_contain_text("following")
        crash_after.touch()
        expect(log).to_contain_text(LAST_WORDS.strip(), timeout=60_000)
        expect(browser_page.locator("#log-size")).not_to_contain_text("following")
        expect(log).to_contain_text("Traceback (most recent call last):")
        expect(browser_page.locator("#log-attempt")).to_have_value("1")
        console.screenshot(browser_page, tmp_path, "console-log.png")


# -- issue 26 item 1: download URLs work alone ------------------------------------------------
# `003_…` §6: the URL is the download, valid 10 minutes. `curl "$url"` fetches the bytes, the
# org's object stays encrypted under its own key in the store, and a URL that is late,
# altered or names nothing answers a plain 404 that repeats none of it.

ROWS = b"".join(
    json.dumps({"messages": [{"role": "user", "content": f"say {w}"},
                             {"role": "assistant", "content": w}]}).encode() + b"\n"
    for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
)  # fmt: skip
CAPABILITY = {
    "base_model": "fixture-tiny-decider", "dataset": {"uri": "fixture:decisions-tiny-v1"},
    "adaptation": {"mode": "readout"}, "hyperparameters": {"max_steps": 5},
    "resources": {"budget": 100},
}  # fmt: skip


def curl(url: str) -> tuple[int, bytes]:
    """The `curl` binary given the URL and nothing else: the status and the body."""
    with tempfile.TemporaryDirectory() as scratch:
        body = Path(scratch) / "body"
        done = subprocess.run(
            ["curl", "-sS", "-o", str(body), "-w", "%{http_code}", url],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        return int(done.stdout), body.read_bytes()


def uploaded(member: httpx.Client, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    grant = member.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl", "sha256": digest, "size": len(data)},
    ).json()
    upload = grant["upload"]
    assert httpx.put(upload["url"], content=data, headers=upload["headers"]).status_code == 200
    assert member.post(f"/v1/train/artifacts/{digest}/confirm", json={}).status_code == 200
    return digest


def download_tokens(stack: StackProcess) -> DownloadTokens:
    """The stack's own sealer, from its master key: how a test makes a URL the stack would
    have answered at another time."""
    master = keys.master_key(stack.home / "master.key", stack.env.get("TRAINYARD_MASTER_KEY", ""))
    return DownloadTokens(keys.derive(master, "download-tokens"), stack.url)


def member_of(stack: StackProcess) -> tuple[str, httpx.Client]:
    org = f"dl-{secrets.token_hex(4)}"
    return org, httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(org)), timeout=60)


def test_an_artifacts_url_alone_downloads_its_bytes(each_stack: StackProcess) -> None:
    _, member = member_of(each_stack)
    digest = uploaded(member, ROWS)
    job_id = trained_on(member, digest)
    answered = [
        member.get(f"/v1/train/artifacts/{digest}").json(),
        *member.get(f"/v1/train/jobs/{job_id}/artifacts").json()["artifacts"],
    ]
    assert len(answered) >= 3  # the upload; the job's snapshot of it and its checkpoint
    for one in answered:
        assert "headers" not in one and one["expires"] - 600 <= time.time() <= one["expires"]
        status, body = curl(one["url"])
        assert status == 200 and hashlib.sha256(body).hexdigest() == one["sha256"]


def trained_on(member: httpx.Client, dataset: str) -> str:
    """A job trained on the uploaded rows, ended: its artifacts (the snapshot it read, what
    it made) carry download URLs too."""
    created = member.post(
        "/v1/train/jobs",
        json={"base_model": "fixture-tiny-llm", "dataset": {"uri": f"artifact:{dataset}"},
              "hyperparameters": {"max_steps": 2}, "resources": {"budget": 100}},
    )  # fmt: skip
    assert created.status_code == 200, created.text
    job = wait_for_job(member, created.json()["id"], lambda j: j["status"] in ENDED)
    assert job["status"] == "succeeded", job.get("failure_code")
    return str(job["id"])


def test_a_published_entrys_url_alone_downloads_its_bytes(each_stack: StackProcess) -> None:
    _, member = member_of(each_stack)
    platform = httpx.Client(
        base_url=each_stack.url,
        headers=bearer(each_stack.create_key("platform", "platform")),
        timeout=60,
    )
    created = member.post("/v1/train/jobs", json=CAPABILITY)
    assert created.status_code == 200, created.text
    job = wait_for_job(member, created.json()["id"], lambda j: j["status"] in ENDED)
    assert job["status"] == "succeeded", job.get("failure_code")
    question = f"q-{secrets.token_hex(4)}"
    published = member.post(
        f"/v1/train/jobs/{job['id']}/publish",
        json={"name": question, "route": {"keys": [question]}},
    )
    assert published.status_code == 200, published.text
    listed = platform.get("/v1/train/published").json()["data"]
    (entry,) = [e for e in listed if e["route"]["keys"] == [question]]
    assert "headers" not in entry and entry["sha256"] == job["result"]["sha256"]
    status, body = curl(entry["url"])
    assert status == 200 and hashlib.sha256(body).hexdigest() == entry["sha256"]


def test_a_late_altered_or_unknown_download_url_is_a_plain_404(each_stack: StackProcess) -> None:
    org, member = member_of(each_stack)
    digest = uploaded(member, ROWS.replace(b"zeta", secrets.token_hex(8).encode()))
    url = member.get(f"/v1/train/artifacts/{digest}").json()["url"]
    assert curl(url)[0] == 200
    token = url.rsplit("/", 1)[-1]
    sealer, now = download_tokens(each_stack), int(time.time())
    refused = {
        "late": sealer.url(Ticket(org, digest, now - 1)),
        "altered": url[:-3] + ("AAA" if not url.endswith("AAA") else "BBB"),
        "unknown object": sealer.url(Ticket(org, "0" * 64, now + 600)),
        "another org": sealer.url(Ticket(f"{org}-x", digest, now + 600)),
        "not a token": f"{each_stack.url}/v1/train/downloads/{'x' * 40}",
    }
    for why, bad in refused.items():
        status, body = curl(bad)
        problem = json.loads(body)
        assert (status, problem["code"]) == (404, "not_found"), why
        assert token not in body.decode() and digest not in body.decode(), why
    # Deleted, its URL answers as one that never was.
    assert member.delete(f"/v1/train/artifacts/{digest}").status_code == 200
    assert curl(url)[0] == 404
    # A URL is a credential: the gateway's access log writes the route, not the token.
    logged = eventually(
        each_stack.log_path.read_text, lambda text: "/v1/train/downloads/-" in text, "log"
    )
    assert not any(u.rsplit("/", 1)[-1] in logged for u in (url, *refused.values()))


# -- issue 26 item 2: refusal codes are the seeds' words --------------------------------------


def grpc_reason(call: Callable[[], object]) -> str:
    """The `ErrorInfo.reason` a gRPC call is refused with."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    status = rpc_status.from_call(caught.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    assert info.domain == "trainyard.dev"
    return info.reason


def test_a_refusal_answers_the_seeds_word_on_both_faces(each_stack: StackProcess) -> None:
    key = each_stack.create_key(f"codes-{secrets.token_hex(3)}")
    job = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
           "resources": {"budget": 100}}  # fmt: skip
    long = {"num_train_epochs": 100, "max_seq_length": 2048, "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 1}  # fmt: skip
    refused = {
        "invalid_request": {**job, "hyperparameters": {"colour": 1}},
        "unsupported_base": {**job, "base_model": "no-such-base"},
        "training_dataset_selection_invalid": {**job, "dataset": {**job["dataset"], "tags": ["x"]}},
        "training_duration_exceeds_limit": {**job, "hyperparameters": long},
    }
    with (
        httpx.Client(base_url=each_stack.url, headers=bearer(key), timeout=30) as api,
        each_stack.channel() as channel,
    ):
        jobs = job_service_pb2_grpc.JobServiceStub(channel)
        metadata = list(bearer(key).items())
        for code, body in refused.items():
            answer = api.post("/v1/train/jobs", json=body)
            assert reason(answer) == code, answer.text
            request = job_service_pb2.CreateJobRequest()
            request.body.update(body)
            assert grpc_reason(
                lambda r=request: jobs.CreateJob(r, metadata=metadata, timeout=30)
            ) == (code.upper())
        unknown = api.post("/v1/train/jobs", json=refused["unsupported_base"])
        assert "fixture-tiny-llm" in unknown.json()["supported"]
        assert reason(api.get("/v1/train/jobs/job_0123456789abcdef")) == "not_found"
        missing = job_service_pb2.GetJobRequest(id="job_0123456789abcdef")
        assert (
            grpc_reason(lambda: jobs.GetJob(missing, metadata=metadata, timeout=30)) == "NOT_FOUND"
        )
        assert api.get("/v1/train/jobs").json().get("jobs", []) == []


# -- issue 26 item 13: every body strict ------------------------------------------------------

SHA = "0" * 64
TINY = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}
LEASED = {"task": "t", "lease": "l"}
NO_CLIENT = "cl_0123456789abcdef"
# A valid body for each operation that takes one, and the role that may call it: the walk
# below fails for an operation the contract gains without an entry here.
BODIES: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("post", "/v1/train/artifacts"): ("member", {"kind": "dataset", "sha256": SHA, "size": 10}),
    ("post", "/v1/train/artifacts/{sha256}/confirm"): ("member", {}),
    ("post", "/v1/train/artifacts/{sha256}/extend"): ("member", {"ttl_seconds": 86400}),
    ("post", "/v1/train/artifacts/{sha256}/pin"): ("member", {}),
    ("post", "/v1/train/artifacts/{sha256}/unpin"): ("member", {}),
    ("post", "/v1/train/clients"): (
        "operator",
        {"base_model": "fixture-tiny-llm", "from": SHA, "with_optimizer": True},
    ),
    ("post", "/v1/train/clients/{id}/forward_backward"): (
        "member",
        {
            "seq": 1,
            "loss_fn": "ppo",
            "forward_only": True,
            "loss_fn_config": {"clip_low_threshold": 0.8},
            "data": [
                {
                    "model_input": {"tokens": [1]},
                    "loss_fn_inputs": {"target_tokens": [2], "logprobs": [-1.0], "advantages": [1.0]},
                }
            ],
        },
    ),
    ("post", "/v1/train/clients/{id}/optim_step"): ("member", {"seq": 1}),
    ("post", "/v1/train/clients/{id}/sample"): (
        "member",
        {
            "seq": 1,
            "prompt_logprobs": True,
            "topk_prompt_logprobs": 2,
            "sampling_params": {"stop_tokens": [2]},
        },
    ),
    ("post", "/v1/train/clients/{id}/save_weights"): ("member", {"seq": 1, "kind": "state"}),
    ("post", "/v1/train/data-sources"): ("member", {"name": "lake", "endpoint": "http://127.0.0.1:9",
                                                    "access_key_id": "AK", "secret_access_key": "SK"}),
    ("post", "/v1/train/estimate"): ("member", TINY),
    ("post", "/v1/train/jobs"): ("member", {**TINY, "resources": {"machines": ["gpu-strict"]}}),
    ("post", "/v1/train/jobs/claim"): ("executor", {"machine": "gpu-strict"}),
    ("post", "/v1/train/jobs/{id}/artifacts"): ("executor", {**LEASED, "kind": "checkpoint", "sha256": SHA, "size": 1}),
    ("post", "/v1/train/jobs/{id}/cancel"): ("member", {}),
    ("post", "/v1/train/jobs/{id}/events"): ("executor", {**LEASED, "events": []}),
    ("post", "/v1/train/jobs/{id}/inputs"): ("executor", {**LEASED, "sha256": SHA}),
    ("post", "/v1/train/jobs/{id}/publish"): ("member", {"name": "strict"}),
    ("post", "/v1/train/jobs/{id}/retry"): ("member", {"resume_from_checkpoint": False}),
    ("post", "/v1/train/keys"): ("admin", {"role": "member", "label": "strict"}),
    ("post", "/v1/train/keys/{id}/revoke"): ("admin", {}),
    ("post", "/v1/train/keys/{id}/rotate"): ("admin", {}),
    ("post", "/v1/train/rates"): ("operator", {"meter": "fixture-tiny-llm-cpu-hour", "micro_cents": 1000}),
    ("post", "/v1/train/wallet/caps"): ("admin", {"micro_cents": 1000000}),
    ("post", "/v1/train/wallet/credit"): ("operator", {"payer": "", "micro_cents": 1, "name": "strict"}),
    ("post", "/v1/train/webhooks"): ("admin", {"url": "http://127.0.0.1:9/hook", "events": ["job.succeeded"]}),
    ("post", "/v1/train/webhooks/{id}/deliveries/{delivery_id}/redeliver"): ("admin", {}),
}  # fmt: skip
# What a refused body must leave as it was, read before and after the walk.
READS = ("/v1/train/rates", "/v1/train/wallet", "/v1/train/jobs", "/v1/train/artifacts",
         "/v1/train/data-sources", "/v1/train/webhooks")  # fmt: skip


def body_operations() -> list[tuple[str, str]]:
    document = json.loads(OPENAPI.read_text())
    return sorted(
        (verb, path)
        for path, operations in document["paths"].items()
        for verb, operation in operations.items()
        if isinstance(operation, dict) and "requestBody" in operation
    )


def test_every_body_refuses_an_unknown_field_and_changes_nothing(
    each_stack: StackProcess,
) -> None:
    assert body_operations() == sorted(BODIES)
    org = f"strict-{secrets.token_hex(3)}"
    keys = {role: each_stack.create_key(org, role) for role in ("member", "executor", "admin")}
    keys["operator"] = each_stack.create_key("ops", "operator")
    headers = {role: bearer(key) for role, key in keys.items()}
    headers["operator"]["x-org-id"] = org
    with httpx.Client(base_url=each_stack.url, timeout=30) as api:
        member = headers["member"]
        job = api.post("/v1/train/jobs", json=BODIES["post", "/v1/train/jobs"][1], headers=member)
        assert job.status_code == 200, job.text
        job_id = job.json()["id"]
        # The job's own preparation snapshots its rows; what follows must change nothing.
        eventually(
            lambda: api.get(f"/v1/train/jobs/{job_id}", headers=member).json(),
            lambda read: (read.get("preparation") or {}).get("status") == "verified",
            "the job's snapshot",
        )
        before = {path: api.get(path, headers=member).json() for path in READS}
        for (verb, path), (role, body) in BODIES.items():
            on = NO_CLIENT if path.startswith("/v1/train/clients/") else job_id
            url = path.format(id=on, sha256=SHA, delivery_id="whd_0000000000000000")
            valid = {**body, "payer": org} if "payer" in body else body
            answer = api.request(verb, url, json={**valid, "colour": 1}, headers=headers[role])
            assert (answer.status_code, reason(answer)) == (400, "invalid_request"), (
                path,
                answer.text,
            )
            assert answer.json()["fields"] == ["colour"], path
        # The typo the rates once took as a free rate, and a name that is not a plain one.
        typo = {"meter": "fixture-tiny-llm-cpu-hour", "price": 1000}
        operator = headers["operator"]
        answer = api.post("/v1/train/rates", json=typo, headers=operator)
        assert answer.json()["fields"] == ["price"]
        answer = api.post("/v1/train/wallet/caps", json={"Cap!": 1}, headers=headers["admin"])
        assert reason(answer) == "invalid_request" and "Cap!" not in answer.text
        missing = api.post("/v1/train/rates", json={"meter": typo["meter"]}, headers=operator)
        assert (reason(missing), missing.json()["fields"]) == ("invalid_request", ["micro_cents"])
        after = {path: api.get(path, headers=member).json() for path in READS}
        assert after == before


# -- issue 26 item 3: money and counters are JSON numbers ----------------------------------
# -- issue 26 item 4: absent blocks are null, not missing keys ------------------------------

PARKED = {
    "base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "project": "2026", "resources": {"machines": ["nowhere"], "max_seconds": 3600},
}  # fmt: skip
NULLS = ("evaluation", "outcome", "preparation")


def seed_shaped(job: dict[str, Any]) -> None:
    """A job as 002 and 003 write one: money and counters are numbers, a block that did not
    apply is `null`, and text that reads like a number stays text."""
    for name in NULLS:
        assert name in job and (job[name] is None or isinstance(job[name], dict))
    assert isinstance(job["cost_micro_cents"], int) and isinstance(job["cost_credits"], int | float)
    # The cost reads in cents, the budget's unit: micro-cents / 10^6.
    assert job["cost_credits"] == pytest.approx(job["cost_micro_cents"] / 10**6)
    budget = job["resources"].get("budget")
    assert budget is None or (isinstance(budget, int) and job["cost_credits"] <= budget)
    seconds = job["resources"].get("max_seconds")
    assert seconds is None or isinstance(seconds, int)


def test_money_and_counters_read_as_numbers_and_absent_blocks_as_null(
    each_stack: StackProcess,
) -> None:
    org = f"numbers-{secrets.token_hex(3)}"
    owner = httpx.Client(base_url=each_stack.url, headers=bearer(each_stack.create_key(org)))
    admin = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(org, "admin"))
    )
    created = owner.post("/v1/train/jobs", json=PARKED)
    assert created.status_code == 200, created.text
    job = created.json()
    seed_shaped(job)
    assert (job["evaluation"], job["outcome"], job["cost_credits"]) == (None, None, 0)
    assert job["resources"]["max_seconds"] == 3600 and job["project"] == "2026"

    def watched_to_its_end(job_id: str) -> list[dict[str, Any]]:
        """The jobs the watch stream carries, line by line, until the job ends."""
        with owner.stream("GET", f"/v1/train/jobs/{job_id}/watch") as streamed:
            assert streamed.status_code == 200
            lines = [json.loads(line) for line in streamed.iter_lines() if line.strip()]
        return [line["job"] for line in lines if "job" in line]

    # A platform job with a budget, cancelled at once: its cost compares with its budget.
    platform = {**PARKED, "resources": {"budget": 100, "max_seconds": 600}}
    paid = owner.post("/v1/train/jobs", json=platform).json()
    assert paid["resources"] == {**paid["resources"], "budget": 100, "max_seconds": 600}
    cancelled = owner.post(f"/v1/train/jobs/{paid['id']}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    seed_shaped(cancelled.json())
    # The stack's executor may hold it already, and stops it first: `cancelling` until then.
    assert watched_to_its_end(paid["id"])[-1]["status"] == "cancelled"
    # Every answer that carries a job: a read, the list, a retry.
    seed_shaped(owner.get(f"/v1/train/jobs/{job['id']}").json())
    listed = owner.get("/v1/train/jobs").json()["jobs"]
    assert {j["id"] for j in listed} >= {job["id"], paid["id"]}
    for one in listed:
        seed_shaped(one)
    retried = owner.post(f"/v1/train/jobs/{paid['id']}/retry", json={"idempotency_key": "r-1"})
    assert retried.status_code == 200, retried.text
    seed_shaped(retried.json()["job"])
    owner.post(f"/v1/train/jobs/{paid['id']}/cancel", json={})
    # The watch stream's jobs too, line by line.
    watched = watched_to_its_end(paid["id"])
    assert watched and watched[-1]["status"] == "cancelled"
    for one in watched:
        seed_shaped(one)
    # The estimate, the wallet, the rates and the ledger: every amount a number.
    estimate = owner.post("/v1/train/estimate", json=platform).json()
    assert isinstance(estimate["expected"]["micro_cents"], int)
    seed_shaped(estimate["job"])
    wallet = owner.get("/v1/train/wallet").json()
    amounts = ("balance_micro_cents", "held_micro_cents", "available_micro_cents")
    assert all(isinstance(wallet[k], int) for k in amounts)
    rates = owner.get("/v1/train/rates").json()["rates"]
    assert rates and all(isinstance(r["micro_cents"], int) for r in rates)
    entries = owner.get("/v1/train/ledger").json()["entries"]
    assert entries and all(isinstance(e["micro_cents"], int) for e in entries)
    # A request's amount is a number too (past 2^31 here), and reads back as one.
    capped = admin.post("/v1/train/wallet/caps", json={"micro_cents": 5 * 10**9})
    assert capped.status_code == 200, capped.text
    assert capped.json()["spend_cap_micro_cents"] == 5 * 10**9
    admin.post("/v1/train/wallet/caps", json={"micro_cents": 0})


def test_a_search_reads_total_null_and_a_page_past_a_mebibyte_counts(
    each_stack: StackProcess,
) -> None:
    org = f"search-{secrets.token_hex(3)}"
    owner = httpx.Client(
        base_url=each_stack.url, headers=bearer(each_stack.create_key(org)), timeout=60
    )

    # 210 chats of eight long messages in a three-byte script: a page of 200 previews (each
    # message cut to 300 characters) is past a mebibyte, and the REST face holds it whole to
    # rewrite it all the same.
    def chat(i: int) -> str:
        said = [
            f"row {i} " + "漢字" * 200,
            f"{'upper' if i % 7 == 0 else 'lower'} {i} " + "漢字" * 200,
        ]
        turns = [
            {"role": r, "content": said[n % 2]} for n, r in enumerate(["user", "assistant"] * 4)
        ]
        return json.dumps({"messages": turns}) + "\n"

    rows = "".join(chat(i) for i in range(210)).encode()
    digest = hashlib.sha256(rows).hexdigest()
    grant = owner.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl", "sha256": digest, "size": len(rows)},
    ).json()
    put = httpx.put(grant["upload"]["url"], content=rows, headers=grant["upload"]["headers"])
    assert put.status_code == 200
    assert owner.post(f"/v1/train/artifacts/{digest}/confirm", json={}).status_code == 200
    parked = {**PARKED, "dataset": {"uri": f"artifact:{digest}"}}
    job = owner.post("/v1/train/jobs", json=parked).json()
    eventually(
        lambda: owner.get(f"/v1/train/jobs/{job['id']}").json()["preparation"],
        lambda p: p is not None and p["status"] == "verified",
        "the snapshot verified",
    )
    dataset = f"/v1/train/jobs/{job['id']}/dataset"
    page = owner.get(dataset, params={"limit": 200})
    assert page.status_code == 200 and len(page.content) > 2**20
    assert page.json()["total"] == 210 and len(page.json()["items"]) == 200
    searched = owner.get(dataset, params={"search": "upper"}).json()
    assert searched["search_applied"] is True and searched["total"] is None
    assert len(searched["items"]) == 25 and searched["has_more"] is True
    owner.post(f"/v1/train/jobs/{job['id']}/cancel", json={})
