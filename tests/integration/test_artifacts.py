"""ArtifactService against a real SeaweedFS, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import json
import os
import random
import secrets
import subprocess
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
import sqlalchemy as sa
from google.protobuf import json_format, struct_pb2

from infra.objectstore import SeaweedFS
from services.artifacts.server import build_server as build_artifacts
from services.claims.server import build_server as build_claims
from services.core import audit, auth, lifecycle, tables
from services.core.config import Config
from services.core.store import Store, utcnow
from tests.integration.test_jobs import info_of, reason_of
from tests.support import ServiceThread, downloaded
from trainyard.artifact.v1 import artifact_service_pb2, artifact_service_pb2_grpc, provenance_pb2
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.job.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chats(*contents: str) -> bytes:
    """A dataset (the only kind an org uploads is checked as one): a chat row a content."""
    return "".join(
        json.dumps({"messages": [{"role": "user", "content": c}]}, ensure_ascii=False) + "\n"
        for c in contents
    ).encode()


class Org:
    """A fresh org with a member key, talking to ArtifactService (and JobService)."""

    def __init__(
        self, store: Store, artifacts: ServiceThread, jobs: ServiceThread | None = None
    ) -> None:
        self.name = f"org-{secrets.token_hex(4)}"
        with store.unit() as session:
            self.key = auth.create_key(session, org=self.name, role="member")[1]
        self._channel = grpc.insecure_channel(artifacts.target)
        self.stub = artifact_service_pb2_grpc.ArtifactServiceStub(self._channel)
        self.jobs = (
            job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
            if jobs
            else None
        )
        self.md = [("authorization", f"Bearer {self.key}")]

    def call(self, method: str, request, stub=None):  # type: ignore[no-untyped-def]
        return getattr(stub or self.stub, method)(request, metadata=self.md, timeout=120)

    def refused(self, method: str, request, stub=None) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(grpc.RpcError) as caught:
            self.call(method, request, stub)
        return reason_of(caught.value)

    def grant(self, data: bytes, **kw):  # type: ignore[no-untyped-def]
        request = artifact_service_pb2.CreateArtifactRequest(
            kind="dataset",
            name="rows.jsonl",
            sha256=kw.pop("sha256", sha(data)),
            size=kw.pop("size", len(data)),
        )
        return self.call("CreateArtifact", request)

    def upload(self, data: bytes) -> str:
        grant = self.grant(data)
        if not grant.stored:
            r = httpx.put(grant.upload.url, content=data, headers=dict(grant.upload.headers))
            assert r.status_code == 200, r.text
        self.call("ConfirmArtifact", artifact_service_pb2.ConfirmArtifactRequest(sha256=sha(data)))
        return sha(data)

    def download(self, digest: str) -> bytes:
        got = self.call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=digest))
        return downloaded(self.stub, got.url)


@pytest.fixture
def org(store: Store, artifacts: ServiceThread) -> Org:
    return Org(store, artifacts)


def stored_keys(seaweed: SeaweedFS, org: str) -> list[str]:
    listed = seaweed.client().list_objects_v2(Bucket="trainyard", Prefix=f"{org}/")
    return [o["Key"] for o in listed.get("Contents", [])]


def test_an_upload_is_granted_put_confirmed_and_read_back(org: Org) -> None:
    data = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    grant = org.grant(data)
    assert not grant.stored and grant.upload.method == "PUT"
    headers = dict(grant.upload.headers)
    assert headers["content-length"] == str(len(data))
    assert (
        headers["x-amz-checksum-sha256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    )
    assert headers["x-amz-server-side-encryption-customer-algorithm"] == "AES256"
    assert 7000 < grant.upload.expires - time.time() <= 7200
    assert httpx.put(grant.upload.url, content=data, headers=headers).status_code == 200
    artifact = org.call(
        "ConfirmArtifact", artifact_service_pb2.ConfirmArtifactRequest(sha256=sha(data))
    )
    assert (artifact.status, artifact.size, artifact.kind) == ("stored", len(data), "dataset")
    assert org.grant(data).stored
    assert org.download(sha(data)) == data


@pytest.mark.parametrize(
    "tamper", ["body", "checksum", "size", "signature", "key", "missing_header"]
)
def test_a_tampered_upload_is_refused_and_nothing_is_stored(
    org: Org, seaweed: SeaweedFS, tamper: str
) -> None:
    data = os.urandom(4096)
    grant = org.grant(data)
    url, headers = grant.upload.url, dict(grant.upload.headers)
    body = data
    if tamper == "body":
        body = os.urandom(4096)
    elif tamper == "checksum":
        headers["x-amz-checksum-sha256"] = base64.b64encode(
            hashlib.sha256(b"other").digest()
        ).decode()
    elif tamper == "size":
        body, headers["content-length"] = data[:-1], str(len(data) - 1)
    elif tamper == "signature":
        url = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    elif tamper == "key":
        headers["x-amz-server-side-encryption-customer-key"] = base64.b64encode(
            os.urandom(32)
        ).decode()
    elif tamper == "missing_header":
        del headers["x-amz-checksum-sha256"]
    assert httpx.put(url, content=body, headers=headers).status_code >= 400
    assert stored_keys(seaweed, org.name) == []
    assert org.refused(
        "ConfirmArtifact", artifact_service_pb2.ConfirmArtifactRequest(sha256=sha(data))
    ) == ("ARTIFACT_NOT_UPLOADED")


def test_an_expired_grant_is_refused(s3_config: Config, store: Store, seaweed: SeaweedFS) -> None:
    short = dataclasses.replace(s3_config, grant_seconds=1)
    served = ServiceThread(lambda: build_artifacts(short, store=store, port=0))
    try:
        org = Org(store, served)
        data = os.urandom(1000)
        grant = org.grant(data)
        time.sleep(2.5)
        assert (
            httpx.put(
                grant.upload.url, content=data, headers=dict(grant.upload.headers)
            ).status_code
            == 403
        )
        assert stored_keys(seaweed, org.name) == []
    finally:
        served.stop()


def test_a_kind_filter_outside_the_kinds_is_refused_with_them(org: Org) -> None:
    digest = org.upload(chats("hi"))
    listed = org.call("ListArtifacts", artifact_service_pb2.ListArtifactsRequest(kind="dataset"))
    assert [a.sha256 for a in listed.artifacts] == [digest] and listed.total_size == 1
    with pytest.raises(grpc.RpcError) as caught:
        org.call("ListArtifacts", artifact_service_pb2.ListArtifactsRequest(kind="model"))
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert info_of(caught.value) == {
        "field": "kind",
        "supported": "dataset,snapshot,checkpoint,lora,capability,basis,merged",
    }


def test_another_orgs_grant_and_object_answer_as_unknown(
    org: Org, store: Store, artifacts: ServiceThread
) -> None:
    other = Org(store, artifacts)
    data = chats(secrets.token_hex(1024))
    digest = org.upload(data)
    unknown = sha(b"never uploaded")
    for method, request in [
        ("GetArtifact", lambda s: artifact_service_pb2.GetArtifactRequest(sha256=s)),
        ("ConfirmArtifact", lambda s: artifact_service_pb2.ConfirmArtifactRequest(sha256=s)),
        ("DeleteArtifact", lambda s: artifact_service_pb2.DeleteArtifactRequest(sha256=s)),
    ]:
        with pytest.raises(grpc.RpcError) as foreign:
            other.call(method, request(digest))
        with pytest.raises(grpc.RpcError) as absent:
            other.call(method, request(unknown))
        assert (foreign.value.code(), foreign.value.details()) == (
            absent.value.code(),
            absent.value.details(),
        )  # type: ignore[attr-defined]
    # Another org registering the same bytes gets its own grant, under its own key.
    assert not other.grant(data).stored


def test_two_hundred_uploads_of_random_sizes_round_trip_bit_exact(org: Org) -> None:
    rng = random.Random(7)
    for _ in range(200):
        size = rng.choice([1, rng.randint(2, 4096), rng.randint(4097, 200_000)])
        data = chats(rng.randbytes(size).decode("latin-1"))  # multi-byte UTF-8 too
        assert org.download(org.upload(data)) == data


def test_a_large_object_goes_up_in_parts_and_verifies(org: Org) -> None:
    frame = chats("")
    size = 64 * 1024 * 1024 + 4099 - len(frame)
    data = chats(os.urandom(size // 2 + 1).hex()[:size])
    grant = org.grant(data)
    assert not grant.HasField("upload") and [p.size for p in grant.parts] == [
        64 * 1024 * 1024,
        4099,
    ]
    for part in grant.parts:
        chunk = data[part.offset : part.offset + part.size]
        assert (
            httpx.put(part.url, content=chunk, headers=dict(part.headers), timeout=120).status_code
            == 200
        )
    artifact = org.call(
        "ConfirmArtifact", artifact_service_pb2.ConfirmArtifactRequest(sha256=sha(data))
    )
    assert artifact.size == len(data)


def test_bytes_that_read_back_otherwise_are_deleted(org: Org, seaweed: SeaweedFS) -> None:
    data, other = os.urandom(100), os.urandom(100)
    grant = org.grant(data, sha256=sha(other))  # a grant for bytes the caller does not send
    assert (
        httpx.put(grant.upload.url, content=data, headers=dict(grant.upload.headers)).status_code
        >= 400
    )
    assert stored_keys(seaweed, org.name) == []


def test_no_plaintext_reaches_the_store_disks(org: Org, seaweed: SeaweedFS) -> None:
    marker = f"PLAINTEXT-MARKER-{secrets.token_hex(8)}".encode()
    org.upload(chats(marker.decode() * 500))
    found = subprocess.run(
        ["grep", "-rl", marker.decode(), str(seaweed.home)], capture_output=True, text=True
    )
    assert found.stdout == ""


def test_the_pending_limit_bounds_unconfirmed_bytes(org: Org) -> None:
    for n in range(2):
        org.grant(b"", sha256=sha(str(n).encode()), size=60 * 1024**3)
    with pytest.raises(grpc.RpcError) as caught:
        org.grant(b"", sha256=sha(b"2"), size=60 * 1024**3)
    assert reason_of(caught.value) == "PENDING_LIMIT"


def test_lapsed_grants_are_swept_and_audited_first(
    s3_config: Config, store: Store, seaweed: SeaweedFS
) -> None:
    # Long enough for the PUT on a busy machine, short enough to wait out.
    short = dataclasses.replace(s3_config, grant_seconds=4)
    served = ServiceThread(lambda: build_artifacts(short, store=store, port=0))
    try:
        org = Org(store, served)
        data = os.urandom(500)
        grant = org.grant(data)
        assert (
            httpx.put(
                grant.upload.url, content=data, headers=dict(grant.upload.headers)
            ).status_code
            == 200
        )
        time.sleep(4.5)
        operator = _operator(store)
        swept = org.stub.SweepArtifacts(
            artifact_service_pb2.SweepArtifactsRequest(), metadata=operator, timeout=60
        )
        assert swept.lapsed >= 1
        assert stored_keys(seaweed, org.name) == []
        with store.unit(write=False) as session:
            codes = session.scalars(
                sa.select(audit.AuditEvent.code).where(
                    audit.AuditEvent.org == org.name,
                    audit.AuditEvent.name == "training.artifact.retention.swept",
                )
            ).all()
        assert list(codes) == ["grant_lapsed"]
    finally:
        served.stop()


def _operator(store: Store) -> list[tuple[str, str]]:
    """A sweep is deployment-wide, so it is the operator's."""
    with store.unit() as session:
        key = auth.create_key(session, org="ops", role="operator")[1]
    return [("authorization", f"Bearer {key}")]


ROWS = [
    {
        "messages": [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "content": f"a{i}"},
        ],
        "tags": ["t"],
    }
    for i in range(20)
]


def jsonl(rows: list[dict]) -> bytes:  # type: ignore[type-arg]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture
def reader_org(store: Store, artifacts: ServiceThread, jobs_reading: ServiceThread) -> Org:
    return Org(store, artifacts, jobs_reading)


def create_job(org: Org, uri: str, **extra) -> object:  # type: ignore[no-untyped-def]
    body = struct_pb2.Struct()
    body.update(
        {
            "base_model": "fixture-tiny-llm",
            "dataset": {"uri": uri, **extra},
            "resources": {"budget": 100},
        }
    )
    return org.call("CreateJob", job_service_pb2.CreateJobRequest(body=body), org.jobs)


def test_an_uploaded_dataset_trains_from_its_snapshot(reader_org: Org, store: Store) -> None:
    digest = reader_org.upload(jsonl(ROWS))
    job = create_job(reader_org, f"artifact:{digest}")
    assert job.train_examples == 20 and job.eval_examples == 0  # type: ignore[attr-defined]
    read = wait_prepared(reader_org, job.id)  # type: ignore[attr-defined]
    assert read.chat_count == 20
    delete = artifact_service_pb2.DeleteArtifactRequest(sha256=digest)
    assert reader_org.refused("DeleteArtifact", delete) == "IN_USE"
    # The snapshot is kept as an object the job holds, read by it until it ends.
    snapshot = read.preparation.snapshot_sha256
    got = reader_org.call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=snapshot))
    assert (got.kind, got.size) == (
        "snapshot",
        len(downloaded(reader_org.stub, got.url)),
    )
    held = artifact_service_pb2.DeleteArtifactRequest(sha256=snapshot)
    assert reader_org.refused("DeleteArtifact", held) == "IN_USE"
    reader_org.call("CancelJob", job_service_pb2.CancelJobRequest(id=read.id), reader_org.jobs)
    assert reader_org.call("DeleteArtifact", delete).deleted
    # The job answers from what it trained on, not from what the source became.
    items = reader_org.call(
        "ListJobDatasetItems",
        job_service_pb2.ListJobDatasetItemsRequest(id=read.id),
        reader_org.jobs,
    )
    assert items.total == 20


def test_a_job_on_the_same_rows_holds_the_snapshot_another_made_kept_as_long_as_it_asks(
    reader_org: Org,
) -> None:
    digest = reader_org.upload(jsonl(ROWS))
    held = []
    for days in (1, 90):
        body = struct_pb2.Struct()
        body.update(
            {
                "base_model": "fixture-tiny-llm",
                "dataset": {"uri": f"artifact:{digest}"},
                "resources": {"budget": 100},
                "retention": {"policy_class": "standard", "ttl_seconds": days * 86400},
            }
        )
        job = reader_org.call(
            "CreateJob", job_service_pb2.CreateJobRequest(body=body), reader_org.jobs
        )
        held.append(wait_prepared(reader_org, job.id))  # type: ignore[attr-defined]
    first, second = held
    snapshot = first.preparation.snapshot_sha256
    assert second.preparation.snapshot_sha256 == snapshot
    # Both hold the one object; it is kept as long as the longer retention asks.
    for job in held:
        listed = reader_org.call(
            "ListJobArtifacts", artifact_service_pb2.ListJobArtifactsRequest(id=job.id)
        ).artifacts
        assert [(a.kind, a.sha256) for a in listed] == [("snapshot", snapshot)]
    objects = reader_org.call(
        "ListArtifacts", artifact_service_pb2.ListArtifactsRequest()
    ).artifacts
    assert [o.sha256 for o in objects].count(snapshot) == 1
    got = reader_org.call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=snapshot))
    left = got.expires_at.ToDatetime(tzinfo=datetime.UTC) - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(days=89) < left <= datetime.timedelta(days=90)


@pytest.mark.parametrize(
    ("rows", "extra", "reason"),
    [
        (
            [
                {
                    "messages": [
                        {"role": "user", "content": "q"},
                        {"role": "assistant", "content": " "},
                    ]
                }
            ],
            {},
            "TRAINING_DATASET_UNUSABLE",
        ),
        (ROWS, {"tags": ["absent"]}, "TRAINING_DATASET_SELECTION_INVALID"),
    ],
)
def test_an_uploaded_dataset_is_checked_at_create(
    reader_org: Org, rows: list, extra: dict, reason: str
) -> None:  # type: ignore[type-arg]
    digest = reader_org.upload(jsonl(rows))
    with pytest.raises(grpc.RpcError) as caught:
        create_job(reader_org, f"artifact:{digest}", **extra)
    assert reason_of(caught.value) == reason


DECISION = {
    "state": "please reply now",
    "questions": {"urgent": {"type": "noul", "criteria": ["no", "yes"]}},
    "target": {"urgent": [0, 1]},
}


@pytest.mark.parametrize(
    ("data", "reason", "line"),
    [
        (
            jsonl([ROWS[0], {"messages": [{"role": "bot", "content": "x"}]}]),
            "TRAINING_DATASET_UNUSABLE",
            "2",
        ),
        (jsonl(ROWS[:3]) + b"not json\n", "TRAINING_DATASET_UNUSABLE", "4"),
        (jsonl([DECISION, {**DECISION, "questions": {}}]), "TRAINING_DATASET_UNUSABLE", "2"),
        (b"\n \n", "TRAINING_DATASET_EMPTY", None),
    ],
    ids=["chat", "not-json", "decision", "empty"],
)
def test_an_upload_that_is_no_dataset_is_refused_with_its_line_and_deleted(
    org: Org, seaweed: SeaweedFS, data: bytes, reason: str, line: str | None
) -> None:
    grant = org.grant(data)
    assert httpx.put(grant.upload.url, content=data, headers=dict(grant.upload.headers)).is_success
    with pytest.raises(grpc.RpcError) as caught:
        org.call("ConfirmArtifact", artifact_service_pb2.ConfirmArtifactRequest(sha256=sha(data)))
    assert reason_of(caught.value) == reason
    assert info_of(caught.value).get("line") == line
    assert stored_keys(seaweed, org.name) == []
    get = artifact_service_pb2.GetArtifactRequest(sha256=sha(data))
    assert org.refused("GetArtifact", get) == "NOT_FOUND"
    assert not org.grant(data).stored  # nothing of it is held: a new upload starts over


def test_decision_rows_are_kept_as_a_dataset_too(org: Org) -> None:
    """A decision base's job names its upload with kind `dataset`, as a chat job does."""
    data = jsonl([DECISION, {**DECISION, "state": "whenever", "target": {"urgent": [1, 0]}}])
    digest = org.upload(data)
    got = org.call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=digest))
    assert (got.kind, got.status) == ("dataset", "stored")


def test_a_dataset_larger_than_a_job_reads_is_refused_at_confirmation(
    org: Org, seaweed: SeaweedFS
) -> None:
    size = 512 * 1024 * 1024 + 1
    grant = org.grant(b"", sha256=sha(b"large"), size=size)
    assert len(grant.parts) == 9  # nothing need be sent: the size alone refuses it
    with pytest.raises(grpc.RpcError) as caught:
        org.call(
            "ConfirmArtifact", artifact_service_pb2.ConfirmArtifactRequest(sha256=sha(b"large"))
        )
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert info_of(caught.value) == {"field": "size", "limit": str(512 * 1024 * 1024)}
    assert not org.grant(b"", sha256=sha(b"large"), size=size).stored


def test_a_preview_answers_each_examples_first_messages_cut(reader_org: Org) -> None:
    long = "ab" * 400
    turns = [{"role": ("user", "assistant")[i % 2], "content": f"{i} {long}"} for i in range(10)]
    digest = reader_org.upload(jsonl([{"messages": turns, "name": "long"}, *ROWS[:3]]))
    job = wait_prepared(reader_org, create_job(reader_org, f"artifact:{digest}").id)  # type: ignore[attr-defined]
    page = reader_org.call(
        "ListJobDatasetItems",
        job_service_pb2.ListJobDatasetItemsRequest(id=job.id),
        reader_org.jobs,
    )
    cut = next(i for i in page.items if i.name == "long")
    assert cut.message_count == 10 and len(cut.messages) == 8
    assert all(len(m.content) == 300 and m.content.endswith("…") for m in cut.messages)
    assert cut.messages[1].content.startswith("1 abab") and cut.messages[1].role == "assistant"
    short = next(i for i in page.items if i.name != "long")
    assert [(m.role, m.content) for m in short.messages] == [
        (m["role"], m["content"]) for m in ROWS[int(short.name[1:])]["messages"]
    ]
    # A job's own read previews the same rows; an item's read answers them whole.
    assert list(job.chats) == list(page.items)
    whole = reader_org.call(
        "GetJobDatasetItem",
        job_service_pb2.GetJobDatasetItemRequest(id=job.id, item=cut.id),
        reader_org.jobs,
    )
    assert [m.content for m in whole.messages] == [t["content"] for t in turns]


def test_a_system_prompt_over_rows_with_their_own_is_refused_with_the_count(
    reader_org: Org,
) -> None:
    rows = [{"messages": [{"role": "system", "content": "x"}, *ROWS[0]["messages"]]}] * 3 + ROWS[:2]
    digest = reader_org.upload(jsonl(rows))
    with pytest.raises(grpc.RpcError) as caught:
        create_job(reader_org, f"artifact:{digest}", system_prompt="Be brief.")
    assert (
        reason_of(caught.value) == "TRAINING_DATASET_CONFLICT"
        and "3 selected rows" in caught.value.details()
    )  # type: ignore[attr-defined]


def test_a_dataset_the_org_did_not_upload_is_refused(
    reader_org: Org, store: Store, artifacts: ServiceThread
) -> None:
    other = Org(store, artifacts)
    foreign = other.upload(jsonl(ROWS[:3]))
    for digest in (foreign, sha(b"nothing")):
        with pytest.raises(grpc.RpcError) as caught:
            create_job(reader_org, f"artifact:{digest}")
        assert reason_of(caught.value) == "INVALID_REQUEST"


def wait_prepared(org: Org, job_id: str) -> job_pb2.Job:
    for _ in range(200):
        job = org.call("GetJob", job_service_pb2.GetJobRequest(id=job_id), org.jobs)
        if job.preparation.status == "verified":
            return job
        time.sleep(0.1)
    raise AssertionError("the job's dataset was never snapshotted")


def finish(store: Store, job_id: str) -> None:
    with store.unit() as session:
        row = session.get(tables.JobRow, job_id)
        for state in ("preparing", "running", "finalizing", "succeeded"):
            lifecycle.move_job(session, row, state)  # type: ignore[arg-type]


def dump(store: Store) -> str:
    with store.engine.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
        return "\n".join(repr(conn.execute(sa.text(f'SELECT * FROM "{t}"')).all()) for t in tables)


def test_a_job_output_with_provenance_and_its_deletion_cascade(
    reader_org: Org, store: Store, seaweed: SeaweedFS, platform_key: str
) -> None:
    dataset = reader_org.upload(jsonl([*ROWS, {"messages": [{"role": "user", "content": secrets.token_hex(8)},
                                                           {"role": "assistant", "content": "z"}]}]))  # fmt: skip
    job = wait_prepared(reader_org, create_job(reader_org, f"artifact:{dataset}").id)  # type: ignore[attr-defined]
    with store.unit(write=False) as session:
        row = session.get(tables.JobRow, job.id)  # type: ignore[attr-defined]
        snapshot, config_sha = row.dataset_sha256, row.spec_sha256  # type: ignore[union-attr]
    platform = [("authorization", f"Bearer {platform_key}"), ("x-org-id", reader_org.name)]
    output = os.urandom(3000)
    grant = reader_org.stub.GrantJobArtifact(
        artifact_service_pb2.GrantJobArtifactRequest(
            job_id=job.id, kind="checkpoint", name="model", sha256=sha(output), size=len(output)
        ),  # type: ignore[attr-defined]
        metadata=platform,
    )
    assert (
        httpx.put(grant.upload.url, content=output, headers=dict(grant.upload.headers)).status_code
        == 200
    )
    reader_org.stub.ConfirmJobArtifact(
        artifact_service_pb2.ConfirmJobArtifactRequest(job_id=job.id, sha256=sha(output)),
        metadata=platform,  # type: ignore[attr-defined]
    )
    record = reader_org.stub.RecordProvenance(
        artifact_service_pb2.RecordProvenanceRequest(
            record=provenance_pb2.ProvenanceRecord(
                job_id=job.id, dataset_sha256=snapshot, artifact_sha256=sha(output),  # type: ignore[attr-defined]
                base_model_id="fixture-tiny-llm", base_model_sha256="e" * 64, training_config_sha256=config_sha,
            )
        ),
        metadata=platform,
    )  # fmt: skip
    again = reader_org.stub.RecordProvenance(
        artifact_service_pb2.RecordProvenanceRequest(
            record=provenance_pb2.ProvenanceRecord(job_id=job.id)
        ),  # type: ignore[attr-defined]
        metadata=platform,
    )
    assert again.id == record.id  # exactly one record per job
    finish(store, job.id)  # type: ignore[attr-defined]
    listed = reader_org.call(
        "ListJobArtifacts", artifact_service_pb2.ListJobArtifactsRequest(id=job.id)
    ).artifacts  # type: ignore[attr-defined]
    # The snapshot the job trained on is an object it holds too, beside its output.
    assert sorted(
        (a.kind, a.sha256, a.provenance_record_id, a.retention_policy) for a in listed
    ) == [
        ("checkpoint", sha(output), record.id, "standard"),
        ("snapshot", snapshot, "", "standard"),
    ]
    assert all(a.HasField("expires_at") and a.url for a in listed)
    got = reader_org.call(
        "GetJobProvenance", artifact_service_pb2.GetJobProvenanceRequest(id=job.id)
    )  # type: ignore[attr-defined]
    assert got.created_at.endswith("Z") and got.schema_version == 1

    delete = artifact_service_pb2.DeleteJobArtifactRequest(id=job.id, sha256=sha(output))  # type: ignore[attr-defined]
    first = reader_org.call("DeleteJobArtifact", delete)
    # The cascade takes every object the job made: its snapshot went with its output.
    assert first.deleted and [(c.sha256, c.kind, c.kept) for c in first.cascaded] == [
        (snapshot, "snapshot", "")
    ]
    again = reader_org.call("DeleteJobArtifact", delete)
    assert again.deleted and not again.cascaded  # idempotent
    hashes = [sha(output), config_sha, snapshot]
    answers = [
        json_format.MessageToJson(
            reader_org.call("GetJob", job_service_pb2.GetJobRequest(id=job.id), reader_org.jobs)
        ),  # type: ignore[attr-defined]
        json_format.MessageToJson(
            reader_org.call("ListJobs", job_service_pb2.ListJobsRequest(), reader_org.jobs)
        ),
        json_format.MessageToJson(
            reader_org.call(
                "ListJobEvents", job_service_pb2.ListJobEventsRequest(id=job.id), reader_org.jobs
            )  # type: ignore[attr-defined]
        ),
        json_format.MessageToJson(
            reader_org.call("ListArtifacts", artifact_service_pb2.ListArtifactsRequest())
        ),
        json_format.MessageToJson(
            reader_org.call(
                "ListJobArtifacts", artifact_service_pb2.ListJobArtifactsRequest(id=job.id)
            )
        ),  # type: ignore[attr-defined]
    ]
    assert (
        reader_org.refused(
            "GetJobProvenance", artifact_service_pb2.GetJobProvenanceRequest(id=job.id)
        )
        == "NOT_FOUND"
    )  # type: ignore[attr-defined]
    tomb = reader_org.call("GetJob", job_service_pb2.GetJobRequest(id=job.id), reader_org.jobs)  # type: ignore[attr-defined]
    assert (
        tomb.deleted and tomb.status == "succeeded" and not tomb.base_model and not tomb.dataset.uri
    )
    everything = "\n".join(answers) + dump(store)
    for value in hashes:
        assert value not in everything
    assert f"{reader_org.name}/{sha(output)}" not in stored_keys(seaweed, reader_org.name)


@pytest.fixture
def claims_reading(
    s3_config: Config, store: Store, artifacts: ServiceThread, platform_key: str
) -> Iterator[ServiceThread]:
    """ClaimService confirming outputs through the ArtifactService above, as the platform."""
    wired = dataclasses.replace(
        s3_config, gateway_url=f"http://{artifacts.target}", service_key=platform_key
    )
    served = ServiceThread(lambda: build_claims(wired, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


def test_a_reported_output_is_the_jobs_result_with_its_size_and_the_job_lists_what_it_holds(
    reader_org: Org, store: Store, claims_reading: ServiceThread
) -> None:
    body = struct_pb2.Struct()
    body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                 "hyperparameters": {"max_steps": 2}, "resources": {"machines": ["gpu-1"]},
                 "output": {"kind": "checkpoint", "name": "model"}})  # fmt: skip
    created = reader_org.call(
        "CreateJob", job_service_pb2.CreateJobRequest(body=body), reader_org.jobs
    )
    job = wait_prepared(reader_org, created.id)
    snapshot = reader_org.call(
        "GetArtifact",
        artifact_service_pb2.GetArtifactRequest(sha256=job.preparation.snapshot_sha256),
    )
    with store.unit() as session:
        token = auth.create_key(session, org=reader_org.name, role="executor")[1]
    executor = [("authorization", f"Bearer {token}")]
    wire = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims_reading.target))
    claimed = wire.ClaimTask(
        claim_service_pb2.ClaimTaskRequest(
            machine="gpu-1", bases=["fixture-tiny-llm"], devices=["cpu"], wait=5,
            supports=task_pb2.Supports(adaptations=["full", "lora"], outputs=["checkpoint", "lora"]),
        ),
        metadata=executor, timeout=60,
    )  # fmt: skip
    task, lease = claimed.task.id, claimed.task.lease
    output = os.urandom(17_000)
    grant = wire.RegisterTaskArtifact(
        claim_service_pb2.RegisterTaskArtifactRequest(
            id=job.id, task=task, lease=lease, kind="checkpoint", name="model",
            sha256=sha(output), size=len(output),
        ),
        metadata=executor, timeout=60,
    )  # fmt: skip
    put = httpx.put(grant.upload.url, content=output, headers=dict(grant.upload.headers))
    assert put.status_code == 200
    # The events as HIP-1333 §5 writes them, with no seq.
    report = json_format.Parse(
        json.dumps({"task": task, "lease": lease, "events": [
            {"type": "status", "status": "running"},
            {"type": "artifact", "sha256": sha(output)},
            {"type": "result", "result": {"sha256": sha(output), "base_sha256": "e" * 64, "step": 2}},
        ]}),
        claim_service_pb2.ReportTaskRequest(id=job.id),
    )  # fmt: skip
    ack = wire.ReportTask(report, metadata=executor, timeout=60)
    assert (ack.status, ack.seq) == ("succeeded", 3)

    read = reader_org.call("GetJob", job_service_pb2.GetJobRequest(id=job.id), reader_org.jobs)
    # The result carries the output's size, as it read back.
    assert (read.result.sha256, read.result.size) == (sha(output), 17_000)
    # The job lists what it holds: its output and the snapshot it trained on, no URLs.
    assert sorted((a.kind, a.sha256, a.name, a.size) for a in read.artifacts) == [
        ("checkpoint", sha(output), "model", 17_000),
        ("snapshot", snapshot.sha256, snapshot.name, snapshot.size),
    ]
    answered = json_format.MessageToDict(read, preserving_proto_field_name=True)
    assert answered["number"] == 1 and answered["result"]["size"] == 17000
    assert all(set(a) == {"sha256", "kind", "name", "size"} for a in answered["artifacts"])
    # A list answers jobs without what each holds.
    listed = reader_org.call("ListJobs", job_service_pb2.ListJobsRequest(), reader_org.jobs)
    assert [list(j.artifacts) for j in listed.jobs] == [[]] and listed.total_size == 1
    # Only what can still be read is listed: an output past its retention is not.
    expire(store, reader_org.name, sha(output))
    read = reader_org.call("GetJob", job_service_pb2.GetJobRequest(id=job.id), reader_org.jobs)
    assert [a.kind for a in read.artifacts] == ["snapshot"] and not read.HasField("result")


def expire(store: Store, org: str, digest: str) -> None:
    from services.core.object_tables import ObjectRow

    with store.unit() as session:
        row = session.get(ObjectRow, (org, digest))
        assert (
            row is not None and row.expires_at is not None
        )  # stored objects carry their retention
        row.expires_at = utcnow() - datetime.timedelta(seconds=1)


def test_retention_is_evaluated_on_read_and_swept_unless_in_use(
    reader_org: Org, store: Store, seaweed: SeaweedFS
) -> None:
    kept = reader_org.upload(jsonl(ROWS[:5]))
    gone = reader_org.upload(jsonl(ROWS[5:9]))
    wait_prepared(reader_org, create_job(reader_org, f"artifact:{kept}").id)  # type: ignore[attr-defined]
    expire(store, reader_org.name, kept)
    expire(store, reader_org.name, gone)
    assert (
        reader_org.refused("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=gone))
        == "NOT_FOUND"
    )
    assert (
        reader_org.call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=kept)).sha256
        == kept
    )
    swept = reader_org.stub.SweepArtifacts(
        artifact_service_pb2.SweepArtifactsRequest(), metadata=_operator(store)
    )
    assert swept.expired >= 1
    keys = stored_keys(seaweed, reader_org.name)
    assert f"{reader_org.name}/{kept}" in keys and f"{reader_org.name}/{gone}" not in keys
