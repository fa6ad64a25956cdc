"""Publishing (HIP-1333 §6) over real gRPC, on SQLite and PostgreSQL alike: jobs driven to
their end through ClaimService with a real output in SeaweedFS, published, listed for the
platform under a revision, and kept from deletion while published."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import secrets
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
import sqlalchemy as sa
from google.protobuf import struct_pb2
from grpc_status import rpc_status

from services.claims.server import build_server as build_claims
from services.core import audit, auth, object_tables
from services.core.config import Config
from services.core.store import Store, utcnow
from tests.support import ServiceThread, downloaded
from trainyard import rest
from trainyard.artifact.v1 import artifact_service_pb2, artifact_service_pb2_grpc
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.job.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    publication_pb2,
)

SUPPORTS = task_pb2.Supports(
    adaptations=["full", "lora", "readout"], outputs=["checkpoint", "lora", "capability"]
)
BASES = ["fixture-tiny-llm", "fixture-tiny-decider"]


@dataclasses.dataclass
class Refusal:
    code: grpc.StatusCode
    reason: str
    metadata: dict[str, str]
    fields: list[str]
    text: str  # everything the refusal carries, to check that no value is echoed


def refusal_of(exc: grpc.RpcError) -> Refusal:
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None
    reason, metadata, violations = rest.details(status)
    fields = [field for field, _ in violations]
    return Refusal(exc.code(), reason, metadata, fields, str(status))  # type: ignore[attr-defined]


def route(keys: list[str], **options: tuple[str, list[str]]) -> publication_pb2.Route:
    out = publication_pb2.Route(keys=keys)
    for key, (kind, labels) in options.items():
        out.options[key].CopyFrom(publication_pb2.RouteOption(type=kind, labels=labels))
    return out


def md(key: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {key}")]


class Org:
    """A fresh org: its member, and its executor on machine `gpu-1`, which trains nothing
    but reports each job's end with an output it uploads."""

    def __init__(
        self, store: Store, jobs: ServiceThread, claims: ServiceThread, artifacts: ServiceThread
    ) -> None:
        self.name = f"org-{secrets.token_hex(4)}"
        with store.unit() as session:
            self.md = md(auth.create_key(session, org=self.name, role="member")[1])
            self.executor = md(auth.create_key(session, org=self.name, role="executor")[1])
        self.jobs = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
        self.claims = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
        self.artifacts = artifact_service_pb2_grpc.ArtifactServiceStub(
            grpc.insecure_channel(artifacts.target)
        )

    def get(self, job_id: str) -> job_pb2.Job:
        return self.jobs.GetJob(
            job_service_pb2.GetJobRequest(id=job_id), metadata=self.md, timeout=30
        )

    def create(self, **spec: Any) -> job_pb2.Job:
        body = struct_pb2.Struct()
        body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                     "hyperparameters": {"max_steps": 2}, "resources": {"machines": ["gpu-1"]},
                     **spec})  # fmt: skip
        job = self.jobs.CreateJob(
            job_service_pb2.CreateJobRequest(body=body), metadata=self.md, timeout=30
        )
        for _ in range(300):
            read = self.get(job.id)
            if read.preparation.status == "verified":
                return read
            time.sleep(0.05)
        raise AssertionError("never prepared")

    def finished(self, *, verdict: str = "", **spec: Any) -> tuple[job_pb2.Job, bytes]:
        """A job ended with an output of its own bytes: `succeeded`, or `rejected` when
        the run's verdict says so."""
        spec.setdefault("output", {"kind": "capability", "name": "triage"})
        job = self.create(**spec)
        claimed = self.claims.ClaimTask(
            claim_service_pb2.ClaimTaskRequest(
                machine="gpu-1", bases=BASES, devices=["cpu"], supports=SUPPORTS, wait=5
            ),
            metadata=self.executor,
            timeout=60,
        )
        assert claimed.job.id == job.id
        task, lease = claimed.task.id, claimed.task.lease
        output = os.urandom(4096)
        digest = hashlib.sha256(output).hexdigest()
        grant = self.claims.RegisterTaskArtifact(
            claim_service_pb2.RegisterTaskArtifactRequest(
                id=job.id, task=task, lease=lease, kind=job.output.kind, name=job.output.name or "out",
                sha256=digest, size=len(output),
            ),
            metadata=self.executor, timeout=60,
        )  # fmt: skip
        put = httpx.put(grant.upload.url, content=output, headers=dict(grant.upload.headers))
        assert put.status_code == 200, put.text
        result = task_pb2.TaskResult(sha256=digest, base_sha256="e" * 64, step=2)
        if verdict:
            result.evaluation.verdict = verdict
        events = [
            task_pb2.TaskEvent(seq=1, type="status", status="running"),
            task_pb2.TaskEvent(seq=2, type="artifact", sha256=digest),
            task_pb2.TaskEvent(seq=3, type="result", result=result),
        ]
        ack = self.claims.ReportTask(
            claim_service_pb2.ReportTaskRequest(id=job.id, task=task, lease=lease, events=events),
            metadata=self.executor,
            timeout=60,
        )
        assert ack.status == (verdict or "succeeded")
        return self.get(job.id), output

    def publish(self, job_id: str, **kw: Any) -> publication_pb2.Publication:
        request = job_service_pb2.PublishJobRequest(id=job_id, **kw)
        answer: publication_pb2.Publication = self.jobs.PublishJob(
            request, metadata=self.md, timeout=30
        )
        return answer

    def refused(self, method: str, request: Any, stub: Any = None) -> Refusal:
        with pytest.raises(grpc.RpcError) as caught:
            getattr(stub or self.jobs, method)(request, metadata=self.md, timeout=30)
        return refusal_of(caught.value)


@pytest.fixture
def wired(s3_config: Config, artifacts: ServiceThread, platform_key: str) -> Config:
    """The platform's credential, with ArtifactService as the gateway: as the stack wires
    JobService and ClaimService."""
    return dataclasses.replace(
        s3_config, gateway_url=f"http://{artifacts.target}", service_key=platform_key
    )


@pytest.fixture
def claims_reading(wired: Config, store: Store) -> Iterator[ServiceThread]:
    served = ServiceThread(lambda: build_claims(wired, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def make_org(
    store: Store,
    jobs_reading: ServiceThread,
    claims_reading: ServiceThread,
    artifacts: ServiceThread,
):  # type: ignore[no-untyped-def]
    return lambda: Org(store, jobs_reading, claims_reading, artifacts)


@pytest.fixture
def platform(jobs_reading: ServiceThread, platform_key: str):  # type: ignore[no-untyped-def]
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs_reading.target))

    def listed(revision: str = "") -> job_service_pb2.ListPublishedResponse:
        request = job_service_pb2.ListPublishedRequest(revision=revision)
        answer: job_service_pb2.ListPublishedResponse = stub.ListPublished(
            request, metadata=md(platform_key), timeout=60
        )
        return answer

    return listed


def trail(store: Store, name: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    with store.unit(write=False) as session:
        rows = session.scalars(
            sa.select(audit.AuditEvent)
            .where(audit.AuditEvent.name == name)
            .order_by(audit.AuditEvent.id)
        ).all()
        return [(r.org, r.subject, r.code, dict(r.details)) for r in rows]


# -- publishing ---------------------------------------------------------------------------


def test_a_succeeded_capability_is_published_and_listed_under_a_revision(
    make_org, platform, store: Store
) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    job, output = acme.finished()
    topic = route(["topic"], topic=("choice", ["billing", "bug", "other"]))
    published = acme.publish(job.id, route=topic)
    # The name defaults to the output's; the record carries the result's object and base.
    assert (published.org, published.name, published.job_id) == (acme.name, "triage", job.id)
    assert (published.sha256, published.base_sha256) == (job.result.sha256, "e" * 64)
    assert (published.form, published.forced) == ("full", False)
    assert published.route == topic and published.HasField("publish_time")
    assert not published.url  # download URLs are the platform's list's alone
    assert trail(store, "training.job.publish.accepted") == [
        (acme.name, job.id, "", {"kind": "capability", "replaced": False})
    ]

    first = platform()
    assert first.changed and len(first.revision) == 64
    (entry,) = [p for p in first.data if p.org == acme.name]
    assert (entry.name, entry.sha256, entry.route) == ("triage", job.result.sha256, topic)
    assert entry.expires - 600 <= time.time() <= entry.expires
    # The URL alone reads the bytes: its token is the credential.
    assert downloaded(acme.artifacts, entry.url) == output

    held = platform(first.revision)
    assert (held.revision, held.changed, list(held.data)) == (first.revision, False, [])
    # Publishing the same again changes nothing the platform installs.
    acme.publish(job.id, route=topic)
    assert platform(first.revision).changed is False

    other, _ = acme.finished(output={"kind": "capability", "name": "spam"})
    acme.publish(other.id, route=route(["spam"]))
    moved = platform(first.revision)
    assert moved.changed and moved.revision != first.revision
    assert sorted(p.name for p in moved.data if p.org == acme.name) == ["spam", "triage"]
    # The published object is reported as such, and reads while published.
    described = acme.artifacts.GetArtifact(
        artifact_service_pb2.GetArtifactRequest(sha256=job.result.sha256), metadata=acme.md
    )
    assert described.published


def test_a_readout_capability_is_served_as_a_head_and_a_checkpoint_is_not_listed(
    make_org, platform
) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    decider, _ = acme.finished(
        base_model="fixture-tiny-decider", dataset={"uri": "fixture:decisions-tiny-v1"},
        hyperparameters={"max_steps": 2},
    )  # fmt: skip
    assert (decider.adaptation.mode, decider.output.kind) == ("readout", "capability")
    head = acme.publish(decider.id, name="sentiment", route=route(["sentiment"]))
    assert head.form == "head"
    model, _ = acme.finished(output={"kind": "checkpoint", "name": "tiny"})
    before = platform().revision
    whole = acme.publish(model.id)
    assert (whole.name, whole.form, whole.HasField("route")) == ("tiny", "full", False)
    after = platform()
    # The platform installs capabilities: a checkpoint moves nothing there.
    assert after.revision == before
    assert [p.name for p in after.data if p.org == acme.name] == ["sentiment"]


def test_a_name_published_again_moves_to_the_new_job(make_org, platform) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    old, _ = acme.finished()
    new, _ = acme.finished()
    topic = route(["topic"])
    acme.publish(old.id, route=topic)
    before = platform()
    # The same name and the same question: a replace, which conflicts with nothing.
    replaced = acme.publish(new.id, name="triage", route=topic)
    assert (replaced.job_id, replaced.sha256) == (new.id, new.result.sha256)
    after = platform(before.revision)
    assert after.changed and after.revision != before.revision
    assert [(p.name, p.job_id) for p in after.data if p.org == acme.name] == [("triage", new.id)]
    # The old output is no longer published: it may go now.
    gone = acme.artifacts.DeleteArtifact(
        artifact_service_pb2.DeleteArtifactRequest(sha256=old.result.sha256), metadata=acme.md
    )
    assert gone.deleted


def test_a_rejected_job_is_published_only_with_force(make_org, store: Store) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    job, _ = acme.finished(verdict="rejected")
    assert job.status == "rejected"
    refused = acme.refused(
        "PublishJob", job_service_pb2.PublishJobRequest(id=job.id, route=route(["topic"]))
    )
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "INVALID_TRANSITION",
    )
    forced = acme.publish(job.id, route=route(["topic"]), force=True)
    assert forced.forced and forced.sha256 == job.result.sha256
    assert [(s, c) for _, s, c, _ in trail(store, "training.job.publish.rejected")] == [
        (job.id, "INVALID_TRANSITION")
    ]
    assert [(s, c) for _, s, c, _ in trail(store, "training.job.publish.accepted")] == [
        (job.id, "forced")
    ]


def test_only_the_orgs_ended_job_is_published(make_org) -> None:  # type: ignore[no-untyped-def]
    acme, globex = make_org(), make_org()
    queued = acme.create(resources={"machines": ["nowhere"]}, output={"name": "later"})
    refused = acme.refused("PublishJob", job_service_pb2.PublishJobRequest(id=queued.id))
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "INVALID_TRANSITION",
    )
    done, _ = acme.finished()
    theirs = globex.refused(
        "PublishJob", job_service_pb2.PublishJobRequest(id=done.id, route=route(["topic"]))
    )
    unknown = globex.refused(
        "PublishJob",
        job_service_pb2.PublishJobRequest(id="job_0123456789abcdef", route=route(["topic"])),
    )
    # Another org's job answers exactly as an unknown one.
    assert theirs == unknown and theirs.reason == "NOT_FOUND"


MARK = "SECRET-7f3a"
ROUTES: list[tuple[str, publication_pb2.Route | None, str]] = [
    ("no keys", route([]), "route.keys"),
    ("65 keys", route([f"{MARK}{i}" for i in range(65)]), "route.keys"),
    ("a key of 257 bytes", route([MARK + "k" * (257 - len(MARK))]), "route.keys"),
    ("an empty key", route([""]), "route.keys"),
    ("a control character", route([MARK + "\x07"]), "route.keys"),
    ("a key twice", route([MARK, MARK]), "route.keys"),
    ("options for a key not answered", route(["topic"], **{MARK: ("choice", ["a"])}), "route.options"),
    ("an unknown question type", route([MARK], **{MARK: (MARK, ["a"])}), "route.options"),
    ("a question with no labels", route([MARK], **{MARK: ("choice", [])}), "route.options"),
    ("a label twice", route([MARK], **{MARK: ("score", [MARK, MARK])}), "route.options"),
    ("a label with a control character", route(["k"], k=("noul", [MARK + "\n"])), "route.options"),
    ("a capability without a route", None, "route.keys"),
]  # fmt: skip


def test_each_route_outside_the_rules_is_refused_naming_the_field_not_the_value(
    make_org,
) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    job, _ = acme.finished()
    for case, bad, field in ROUTES:
        request = job_service_pb2.PublishJobRequest(id=job.id)
        if bad is not None:
            request.route.CopyFrom(bad)
        refused = acme.refused("PublishJob", request)
        assert (refused.reason, refused.fields, refused.metadata["field"]) == (
            "INVALID_REQUEST",
            [field],
            field,
        ), case
        assert MARK not in refused.text, case
    bad_name = acme.refused(
        "PublishJob",
        job_service_pb2.PublishJobRequest(id=job.id, name=MARK + "/..", route=route(["topic"])),
    )
    assert bad_name.fields == ["name"] and MARK not in bad_name.text
    checkpoint, _ = acme.finished(output={"kind": "checkpoint", "name": "tiny"})
    routed = acme.refused(
        "PublishJob", job_service_pb2.PublishJobRequest(id=checkpoint.id, route=route(["topic"]))
    )
    assert (routed.reason, routed.fields) == ("INVALID_REQUEST", ["route"])
    # Nothing was published by any of them.
    assert acme.publish(job.id, route=route(["topic"])).name == "triage"


def test_two_capabilities_may_not_claim_one_question(make_org) -> None:  # type: ignore[no-untyped-def]
    acme, globex = make_org(), make_org()
    first, second = acme.finished(), acme.finished()
    a, b = first[0].id, second[0].id
    acme.publish(a, name="topics", route=route(["topic"]))
    acme.publish(a, name="intents", route=route(["intent"], intent=("choice", ["buy", "sell"])))

    def conflict(**kw: Any) -> Refusal:
        return acme.refused("PublishJob", job_service_pb2.PublishJobRequest(id=b, **kw))

    # Both on a key with no options.
    on_key = conflict(name="other", route=route(["topic", "mood"]))
    assert (on_key.code, on_key.reason) == (grpc.StatusCode.ALREADY_EXISTS, "ROUTE_CONFLICT")
    assert on_key.metadata == {"publication": "topics"}
    # Both naming the same question under a key: the type and the labels, in order.
    same = conflict(name="other", route=route(["intent"], intent=("choice", ["buy", "sell"])))
    assert same.reason == "ROUTE_CONFLICT" and same.metadata == {"publication": "intents"}
    # Any other question under the key, the whole key beside a narrowed one, another org's
    # capability on the same question, and a replace of the same name are not conflicts.
    acme.publish(b, name="reordered", route=route(["intent"], intent=("choice", ["sell", "buy"])))
    acme.publish(b, name="scored", route=route(["intent"], intent=("score", ["buy", "sell"])))
    acme.publish(b, name="whole-intent", route=route(["intent"]))
    acme.publish(b, name="topics", route=route(["topic"]))
    theirs, _ = globex.finished()
    globex.publish(theirs.id, name="topics", route=route(["topic"]))


def test_only_the_platform_lists_what_is_published(
    make_org, jobs_reading: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs_reading.target))
    with store.unit() as session:
        others = {
            role: md(auth.create_key(session, org=acme.name, role=role)[1])
            for role in ("admin", "executor", "operator")
        }
    for credential in (acme.md, *others.values()):
        with pytest.raises(grpc.RpcError) as caught:
            stub.ListPublished(job_service_pb2.ListPublishedRequest(), metadata=credential)
        assert refusal_of(caught.value).reason == "PERMISSION_DENIED"


# -- what publishing keeps ----------------------------------------------------------------


def test_a_published_object_is_neither_deleted_nor_swept(make_org, store: Store, seaweed) -> None:  # type: ignore[no-untyped-def]
    acme = make_org()
    job, output = acme.finished()
    acme.publish(job.id, route=route(["topic"]))
    digest = job.result.sha256
    for method, request in [
        ("DeleteArtifact", artifact_service_pb2.DeleteArtifactRequest(sha256=digest)),
        ("DeleteJobArtifact", artifact_service_pb2.DeleteJobArtifactRequest(id=job.id, sha256=digest)),
    ]:  # fmt: skip
        refused = acme.refused(method, request, acme.artifacts)
        assert (refused.code, refused.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "PUBLISHED")
    # Past its retention, a published object still reads and the sweep keeps it.
    with store.unit() as session:
        row = session.get(object_tables.ObjectRow, (acme.name, digest))
        assert row is not None
        row.expires_at = utcnow() - datetime.timedelta(seconds=1)
    with store.unit() as session:
        operator = md(auth.create_key(session, org="ops", role="operator")[1])
    acme.artifacts.SweepArtifacts(artifact_service_pb2.SweepArtifactsRequest(), metadata=operator)
    got = acme.artifacts.GetArtifact(
        artifact_service_pb2.GetArtifactRequest(sha256=digest), metadata=acme.md
    )
    assert downloaded(acme.artifacts, got.url) == output
    assert acme.get(job.id).result.sha256 == digest


def test_the_list_fails_rather_than_read_empty_when_objects_cannot_be_signed(
    jobs: ServiceThread, store: Store, platform_key: str
) -> None:
    """A JobService with no way to ArtifactService (no service key) cannot sign a URL."""
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    listed = stub.ListPublished(job_service_pb2.ListPublishedRequest(), metadata=md(platform_key))
    assert listed.changed and not listed.data  # nothing published: nothing to sign
    with store.unit() as session:
        session.add(
            object_tables.PublicationRow(
                org="acme", name="triage", job_id="job_0123456789abcdef", sha256="a" * 64,
                base_sha256="e" * 64, kind="capability", form="full", route={"keys": ["topic"]},
                forced=False, publish_time=utcnow(),
            )
        )  # fmt: skip
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListPublished(job_service_pb2.ListPublishedRequest(), metadata=md(platform_key))
    assert refusal_of(caught.value).reason == "UNAVAILABLE"
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    garbage = job_service_pb2.ListPublishedRequest(revision=MARK)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListPublished(garbage, metadata=md(platform_key))
    bad = refusal_of(caught.value)
    assert bad.fields == ["revision"] and MARK not in bad.text
