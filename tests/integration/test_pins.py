"""Pins and extensions against a real SeaweedFS, on SQLite and PostgreSQL alike: what the
retention sweep keeps and takes, and an extension that changes nothing but the expiry."""

from __future__ import annotations

import os
import secrets

import httpx
import pytest
import sqlalchemy as sa
from google.protobuf import struct_pb2

from infra.objectstore import SeaweedFS
from services.core import audit, tables
from services.core.store import Store
from tests.integration.test_artifacts import (
    ROWS,
    Org,
    _operator,
    create_job,
    expire,
    finish,
    jsonl,
    org,
    reader_org,
    sha,
    stored_keys,
    wait_prepared,
)
from trainyard.artifact.v1 import artifact_pb2

__all__ = ["org", "reader_org"]  # the fixtures, used by name
from trainyard.artifact.v1 import artifact_service_pb2 as pb


def sweep(org: Org, store: Store) -> pb.SweepArtifactsResponse:
    return org.stub.SweepArtifacts(
        pb.SweepArtifactsRequest(), metadata=_operator(store), timeout=60
    )


def get(org: Org, digest: str) -> artifact_pb2.Artifact:
    return org.call("GetArtifact", pb.GetArtifactRequest(sha256=digest))


def listing(seaweed: SeaweedFS, org: Org) -> dict[str, tuple[str, int, object]]:
    """Each stored key's ETag, size and modification time, as the object store says."""
    found = seaweed.client().list_objects_v2(Bucket="trainyard", Prefix=f"{org.name}/")
    return {o["Key"]: (o["ETag"], o["Size"], o["LastModified"]) for o in found.get("Contents", [])}


def test_a_pinned_object_survives_the_sweep_that_takes_its_unpinned_twin(
    org: Org, store: Store, seaweed: SeaweedFS
) -> None:
    tag = secrets.token_hex(4)
    pinned = org.upload(jsonl([{**ROWS[0], "tags": [tag, "a"]}]))
    twin = org.upload(jsonl([{**ROWS[0], "tags": [tag, "b"]}]))
    first = org.call("PinArtifact", pb.PinArtifactRequest(sha256=pinned))
    assert (first.pinned, first.kept_by, first.HasField("expire_time")) == (True, "pinned", False)
    again = org.call("PinArtifact", pb.PinArtifactRequest(sha256=pinned))  # a no-op
    assert again == first
    expire(store, org.name, pinned)
    expire(store, org.name, twin)
    assert get(org, pinned).pinned
    assert org.refused("GetArtifact", pb.GetArtifactRequest(sha256=twin)) == "NOT_FOUND"
    # A pinned object cannot be deleted either, until it is unpinned.
    assert org.refused("DeleteArtifact", pb.DeleteArtifactRequest(sha256=pinned)) == "PINNED"

    assert sweep(org, store).expired >= 1
    keys = stored_keys(seaweed, org.name)
    assert f"{org.name}/{pinned}" in keys and f"{org.name}/{twin}" not in keys
    assert get(org, pinned).sha256 == pinned

    # Unpinned past its expiry: answered once, then gone, and the next sweep takes it.
    unpinned = org.call("UnpinArtifact", pb.UnpinArtifactRequest(sha256=pinned))
    assert (unpinned.pinned, unpinned.HasField("kept_by")) == (False, False)
    assert unpinned.HasField("expire_time")
    assert org.refused("GetArtifact", pb.GetArtifactRequest(sha256=pinned)) == "NOT_FOUND"
    assert org.refused("UnpinArtifact", pb.UnpinArtifactRequest(sha256=pinned)) == "NOT_FOUND"
    sweep(org, store)
    assert f"{org.name}/{pinned}" not in stored_keys(seaweed, org.name)
    with store.unit(write=False) as session:
        trail = session.scalars(
            sa.select(audit.AuditEvent.name)
            .where(audit.AuditEvent.org == org.name, audit.AuditEvent.name.like("%pinned"))
            .order_by(audit.AuditEvent.id)
        ).all()
    assert list(trail) == ["training.artifact.pinned", "training.artifact.unpinned"]


def test_an_extension_changes_the_expiry_and_not_a_byte(
    org: Org, store: Store, seaweed: SeaweedFS
) -> None:
    digest = org.upload(jsonl([{**ROWS[1], "tags": [secrets.token_hex(4)]}]))
    before, stored = get(org, digest), listing(seaweed, org)
    extended = org.call(
        "ExtendArtifact", pb.ExtendArtifactRequest(sha256=digest, ttl_seconds=60 * 86_400)
    )
    assert extended.expire_time.ToSeconds() > before.expire_time.ToSeconds()
    assert extended.expires_at == extended.expire_time
    assert (extended.sha256, extended.size, extended.kind) == (digest, before.size, before.kind)
    assert listing(seaweed, org) == stored  # the same bytes, never written again
    assert sha(org.download(digest)) == digest
    with store.unit(write=False) as session:
        grants = session.scalar(
            sa.select(sa.func.count()).where(
                audit.AuditEvent.org == org.name,
                audit.AuditEvent.name == "training.artifact.placeholder.registered",
            )
        )
    assert grants == 1  # the upload's own grant, and no other

    shorter = pb.ExtendArtifactRequest(sha256=digest, ttl_seconds=86_400)
    assert org.refused("ExtendArtifact", shorter) == "INVALID_REQUEST"
    too_long = pb.ExtendArtifactRequest(sha256=digest, ttl_seconds=91 * 86_400)
    assert org.refused("ExtendArtifact", too_long) == "INVALID_REQUEST"
    assert get(org, digest).expire_time == extended.expire_time  # refusals changed nothing


def test_an_expired_object_a_live_objects_provenance_names_survives(
    reader_org: Org, store: Store, seaweed: SeaweedFS, platform_key: str
) -> None:
    """A job trained on a snapshot made a checkpoint: past its expiry, the snapshot is kept
    while the checkpoint lives, and taken with it once the checkpoint expires too."""
    rows = [*ROWS, {"messages": [{"role": "user", "content": secrets.token_hex(8)},
                                 {"role": "assistant", "content": "z"}]}]  # fmt: skip
    dataset = reader_org.upload(jsonl(rows))
    job = wait_prepared(reader_org, create_job(reader_org, f"artifact:{dataset}").id)  # type: ignore[attr-defined]
    with store.unit(write=False) as session:
        snapshot = session.get(tables.JobRow, job.id).dataset_sha256  # type: ignore[union-attr]
    platform = [("authorization", f"Bearer {platform_key}"), ("x-org-id", reader_org.name)]
    output = os.urandom(2000)
    grant = reader_org.stub.GrantJobArtifact(
        pb.GrantJobArtifactRequest(
            job_id=job.id, kind="checkpoint", name="model", sha256=sha(output), size=len(output)
        ),
        metadata=platform,
    )
    put = httpx.put(grant.upload.url, content=output, headers=dict(grant.upload.headers))
    assert put.status_code == 200
    reader_org.stub.ConfirmJobArtifact(
        pb.ConfirmJobArtifactRequest(job_id=job.id, sha256=sha(output)), metadata=platform
    )
    finish(store, job.id)
    expire(store, reader_org.name, snapshot)
    kept = get(reader_org, snapshot)
    assert kept.kept_by == f"object:{sha(output)}" and kept.HasField("expire_time")
    sweep(reader_org, store)
    keys = stored_keys(seaweed, reader_org.name)
    assert f"{reader_org.name}/{snapshot}" in keys and f"{reader_org.name}/{sha(output)}" in keys

    expire(store, reader_org.name, sha(output))
    assert reader_org.refused("GetArtifact", pb.GetArtifactRequest(sha256=snapshot)) == "NOT_FOUND"
    sweep(reader_org, store)
    keys = stored_keys(seaweed, reader_org.name)
    assert f"{reader_org.name}/{snapshot}" not in keys
    assert f"{reader_org.name}/{sha(output)}" not in keys


@pytest.mark.parametrize("body", [{"ttl_seconds": 3600, "colour": 1}, {}])
def test_an_extension_body_is_read_strictly(org: Org, body: dict[str, object]) -> None:
    digest = org.upload(jsonl([{**ROWS[2], "tags": [secrets.token_hex(4)]}]))
    request = pb.ExtendArtifactRequest(sha256=digest)
    request.body.CopyFrom(struct_pb2.Struct())
    request.body.update(body)
    assert org.refused("ExtendArtifact", request) == "INVALID_REQUEST"
