"""Uploads under grants, and their confirmation. A grant (CreateArtifact for the org's own
datasets, GrantJobArtifact for a job's outputs) is a presigned PUT signed over the length,
the sha256 checksum and the object's SSE-C key, or for larger bytes one presigned part per
`PART_SIZE`, each signed over its length and the key (`objects.py`). The object's row is
`pending` until the upload is confirmed (ConfirmArtifact, ConfirmJobArtifact): read back
from the store and kept only if it is exactly the bytes granted, encrypted, and (a
dataset) rows a job can train on."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping

from sqlalchemy.orm import Session

from services.artifacts import store
from services.artifacts.crypto import OrgKeys
from services.artifacts.objects import PART_SIZE, ObjectStore
from services.artifacts.reads import ArtifactReads
from services.core import audit, datasets, errors, lifecycle, limits, retention
from services.core.auth import Principal
from services.core.config import Config
from services.core.datasets import MAX_DATASET_BYTES
from services.core.money import storage, windows
from services.core.object_tables import ObjectRow
from services.core.retention import Retention
from services.core.states import ObjectStatus
from services.core.store import Store
from services.core.tables import JobRow
from trainyard.artifact.v1 import artifact_pb2

MAX_SIZE = 64 * 1024**3
PENDING_LIMIT_BYTES = limits.PENDING_LIMIT_BYTES
USER_KINDS, JOB_KINDS = store.USER_KINDS, store.JOB_KINDS
CONTENT_TYPES = {"dataset": "application/jsonl", "snapshot": "application/jsonl"}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
META_VALUE = re.compile(r"^[A-Za-z0-9._:-]{0,64}$")


def _check_produces(job: JobRow | None, kind: str) -> None:
    """A producer registers only what it makes: a job its output's kind, its resumable
    state (`checkpoint`) and its dataset snapshot; a training client (no job row) the
    adapters it saves. So another kind's bytes cannot pass as a job's output and be
    unpacked by whoever starts `from` it."""
    made = ("lora",) if job is None else (job.frozen().output.kind, "checkpoint", "snapshot")
    if kind not in made:
        raise errors.ValidationError(
            "kind", "is not a kind this job produces", metadata={"supported": ",".join(made)}
        )


class Grants:
    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        keys: OrgKeys,
        config: Config,
        reads: ArtifactReads,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self._store = store
        self._objects = objects
        self._keys = keys
        self._config = config
        self._reads = reads
        self._now = clock

    # -- grants --------------------------------------------------------------------------------

    def grant(
        self,
        principal: Principal,
        *,
        kind: str,
        name: str,
        sha256: str,
        size: int,
        job_id: str = "",
        meta: Mapping[str, str] | None = None,
        request_id: str = "",
    ) -> artifact_pb2.Grant:
        allowed = JOB_KINDS if job_id else USER_KINDS
        if kind not in allowed:
            raise errors.ValidationError(
                "kind",
                "is not a kind this call registers",
                metadata={"supported": ",".join(allowed)},
            )
        if not NAME.match(name or "x"):
            raise errors.ValidationError(
                "name", "must be letters, digits, dots, dashes or underscores"
            )
        if not store.is_sha256(sha256):
            raise errors.ValidationError("sha256", "must be 64 lower-case hex digits")
        if kind == "dataset" and size == 0:
            raise datasets.empty("size")  # as its confirmation would, before any bytes move
        if not 1 <= size <= MAX_SIZE:
            raise errors.ValidationError("size", "must be between 1 byte and 64 GiB")
        meta = dict(meta or {})
        if len(meta) > 16 or any(
            not NAME.match(k) or not META_VALUE.match(v) for k, v in meta.items()
        ):
            raise errors.ValidationError("meta", "must hold at most 16 short, non-secret values")
        return store.retry(
            lambda: self._grant(
                principal.org, kind, name or kind, sha256, size, job_id, meta, principal, request_id
            )
        )

    def _grant(
        self,
        org: str,
        kind: str,
        name: str,
        sha256: str,
        size: int,
        job_id: str,
        meta: dict[str, str],
        principal: Principal,
        request_id: str,
    ) -> artifact_pb2.Grant:
        now = self._now()
        with self._store.unit() as session:
            kept = retention.DEFAULT
            if job_id:
                job = store.owned_producer(session, org, job_id)
                _check_produces(job, kind)
                if job is not None:
                    kept = retention.of_job(job)
            row = store.object_row(session, org, sha256, lock=True)
            if row is not None and row.status == ObjectStatus.STORED:
                # The org holds these bytes (an identical run made them): the cheapest
                # path, the job names the object it already has.
                if job_id:
                    self._link(session, job_id, row, kind, name, kept)
                return artifact_pb2.Grant(sha256=sha256, stored=True)
            if row is not None and row.size != size:
                # The same sha256 cannot have two sizes; the earlier declaration is dropped.
                self._drop_pending(row)
                store.discard(session, row)
                row = None
            if store.pending_bytes(session, org, besides=sha256) + size > PENDING_LIMIT_BYTES:
                raise errors.ResourceExhausted(
                    "The org holds too many granted, unconfirmed bytes.", reason="PENDING_LIMIT"
                )
            # Its payer must hold a month of what the org keeps with these bytes (§10).
            storage.admit(
                session, windows.Policy.of(self._config), org, size, besides=sha256, now=now
            )
            content_type = CONTENT_TYPES.get(kind, "application/x-tar")
            key = self._keys.object_key(session, org, sha256, create=True)
            if row is None:
                row = store.add_placeholder(
                    session,
                    org=org,
                    sha256=sha256,
                    size=size,
                    kind=kind,
                    name=name,
                    job_id=job_id,
                    retention_policy=kept.policy,
                    ttl_seconds=kept.ttl_seconds,
                    meta=meta,
                    now=now,
                )
                audit.record(
                    session,
                    "training.artifact.placeholder.registered",
                    org=org,
                    subject=row.id,
                    actor=principal.key_id,
                    request_id=request_id,
                    job=job_id or None,
                )
            if job_id:  # so each job granted these bytes may confirm them
                self._link(session, job_id, row, kind, name, kept)
            row.grant_expires = now + dt.timedelta(seconds=self._config.grant_seconds)
            expires = int(row.grant_expires.timestamp())
            grant = artifact_pb2.Grant(sha256=sha256, stored=False)
            if size <= PART_SIZE:
                put = self._objects.presign_put(
                    org, sha256, size, key, content_type, self._config.grant_seconds
                )
                grant.upload.CopyFrom(
                    artifact_pb2.Transfer(
                        method="PUT", url=put.url, headers=put.headers, expires=expires
                    )
                )
                return grant
            if not row.upload_id:
                row.upload_id = self._objects.start_multipart(org, sha256, key, content_type)
            for number, offset in enumerate(range(0, size, PART_SIZE), start=1):
                length = min(PART_SIZE, size - offset)
                part = self._objects.presign_part(
                    org, sha256, row.upload_id, number, length, key, self._config.grant_seconds
                )
                grant.parts.add(
                    number=number, offset=offset, size=length, url=part.url, headers=part.headers
                )
            return grant

    def _drop_pending(self, row: ObjectRow) -> None:
        if row.upload_id:
            self._objects.abort_multipart(row.org, row.sha256, row.upload_id)
        self._objects.delete(row.org, row.sha256)

    def _link(
        self,
        session: Session,
        job_id: str,
        row: ObjectRow,
        kind: str,
        name: str,
        kept: Retention | None = None,
    ) -> None:
        """Name the object as one the job produced; a stored object is kept at least as
        long as this job's retention asks."""
        lifecycle.hold(
            session,
            row,
            job_id,
            kind=kind,
            name=name,
            now=self._now(),
            kept=kept,
            default_days=self._config.retention_days,
        )

    def _expiry(self, kept: Retention, stored: dt.datetime) -> dt.datetime | None:
        return retention.expiry(kept, stored, self._config.retention_days)

    # -- confirmation --------------------------------------------------------------------------

    def confirm(
        self, principal: Principal, sha256: str, *, job_id: str = ""
    ) -> artifact_pb2.Artifact:
        """Read the upload back; keep it only if it is exactly the bytes granted, sealed."""
        org = principal.org
        if not store.is_sha256(sha256):
            raise errors.NotFound()
        with self._store.unit(write=False) as session:
            row = store.object_row(session, org, sha256)
            if (
                row is None
                or row.status not in (ObjectStatus.PENDING, ObjectStatus.STORED)
                or (job_id and store.job_link(session, org, job_id, sha256) is None)
            ):
                raise errors.NotFound()
            key = self._keys.object_key(session, org, sha256)
            upload_id, size, status, kind = row.upload_id, row.size, row.status, row.kind
        if status == ObjectStatus.STORED:
            if job_id:
                store.retry(lambda: self._confirm_link(org, sha256, job_id))
            return (
                self._reads.describe(principal, sha256, with_url=False)
                if not job_id
                else self._reads.job_artifact(org, job_id, sha256)
            )
        dataset = kind == "dataset"
        if dataset and size > MAX_DATASET_BYTES:
            if upload_id:
                self._objects.abort_multipart(org, sha256, upload_id)
            self._discard(org, sha256)
            raise errors.ValidationError(
                "size",
                "is larger than a dataset a job can train on",
                metadata={"limit": str(MAX_DATASET_BYTES)},
            )
        if upload_id and not self._objects.complete_multipart(org, sha256, upload_id, key):
            raise errors.FailedPrecondition(
                "The object's bytes have not arrived.", reason="ARTIFACT_NOT_UPLOADED"
            )
        back = self._objects.read_back(org, sha256, key, keep=dataset)
        if back is None:
            raise errors.FailedPrecondition(
                "The object's bytes have not arrived.", reason="ARTIFACT_NOT_UPLOADED"
            )
        if back.sha256 != sha256 or back.size != size or not back.encrypted:
            self._discard(org, sha256)
            raise errors.FailedPrecondition(
                "The uploaded bytes read back otherwise than granted and were deleted.",
                reason="ARTIFACT_MISMATCH",
            )
        if dataset:
            # Checked as a job's create would read it, so no bytes a job would refuse are
            # kept: the upload is refused here, with the row's line, and deleted.
            try:
                datasets.check_upload(back.data or b"")
            except errors.DomainError:
                self._discard(org, sha256)
                raise
        store.retry(lambda: self._stored(org, sha256, job_id))
        if job_id:
            return self._reads.job_artifact(org, job_id, sha256)
        return self._reads.describe(principal, sha256, with_url=False)

    def _stored(self, org: str, sha256: str, job_id: str) -> None:
        with self._store.unit() as session:
            row = store.object_row(session, org, sha256, lock=True)
            if row is None:
                raise errors.NotFound()
            if row.status != ObjectStatus.STORED:
                now = self._now()
                kept = Retention(row.retention_policy, row.ttl_seconds)
                lifecycle.object_stored(row, now, self._expiry(kept, now))
            if job_id:
                self._link(session, job_id, row, row.kind, row.name)

    def _confirm_link(self, org: str, sha256: str, job_id: str) -> None:
        with self._store.unit() as session:
            row = store.object_row(session, org, sha256)
            if row is None:
                raise errors.NotFound()
            self._link(session, job_id, row, row.kind, row.name)

    def _discard(self, org: str, sha256: str) -> None:
        """Delete an upload that is not kept, bytes and row."""
        self._objects.delete(org, sha256)
        store.retry(lambda: self._forget(org, sha256))

    def _forget(self, org: str, sha256: str) -> None:
        with self._store.unit() as session:
            store.forget_pending(session, org, sha256)
