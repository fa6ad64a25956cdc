"""ArtifactService's logic: grants, read-back confirmation, reads, retention, provenance
and the deletion cascade. No gRPC here."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import sqlalchemy as sa
from google.protobuf import timestamp_pb2
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from services.artifacts import provenance
from services.artifacts.crypto import KeyWrap, deleted_digest, object_key
from services.artifacts.objects import PART_SIZE, ObjectStore
from services.artifacts.store import DeletedObjectRow, JobArtifactRow, OrgKeyRow, ProvenanceRow
from services.core import audit, errors, ids, lifecycle
from services.core.auth import Principal
from services.core.config import Config
from services.core.pagetoken import PageTokens, page_size
from services.core.store import Store, retrying, utcnow
from services.core.tables import JobRow, ObjectRow, in_use, readable
from trainyard.artifact.v1 import artifact_pb2, artifact_service_pb2, provenance_pb2

log = logging.getLogger(__name__)
T = TypeVar("T")

DOWNLOAD_SECONDS = 600
MAX_SIZE = 64 * 1024**3
PENDING_LIMIT_BYTES = 128 * 1024**3
USER_KINDS = ("dataset",)
JOB_KINDS = ("snapshot", "checkpoint", "lora", "capability", "basis", "merged")
CONTENT_TYPES = {"dataset": "application/jsonl", "snapshot": "application/jsonl"}
SHA256 = re.compile(r"^[0-9a-f]{64}$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
META_VALUE = re.compile(r"^[A-Za-z0-9._:-]{0,64}$")


def _ts(value: dt.datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _check_sha(sha256: str) -> None:
    if not SHA256.match(sha256):
        raise errors.NotFound()


@dataclasses.dataclass(frozen=True)
class Retention:
    policy: str
    ttl_seconds: int | None


class ArtifactService:
    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        wrap: KeyWrap,
        config: Config,
        tokens: PageTokens,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._store = store
        self._objects = objects
        self._wrap = wrap
        self._config = config
        self._tokens = tokens
        self._now = clock

    def _retry(self, work: Callable[[], T]) -> T:
        # Two grants may race to create an org's key or an object's row: the loser retries.
        return retrying(work, on=(StaleDataError, IntegrityError))

    # -- helpers ---------------------------------------------------------------------------

    def _org_key(self, session: Session, org: str, *, create: bool = False) -> bytes:
        row = session.get(OrgKeyRow, org)
        if row is None:
            if not create:
                raise errors.NotFound()
            row = OrgKeyRow(org=org, wrapped=self._wrap.new_wrapped(org), create_time=self._now())
            session.add(row)
            session.flush()
        return self._wrap.unwrap(org, row.wrapped)

    def _in_use(self, session: Session, org: str, sha256: str) -> bool:
        return in_use(session, org, sha256)

    def _visible(self, session: Session, row: ObjectRow | None) -> bool:
        return readable(session, row, self._now())

    def _object(self, session: Session, org: str, sha256: str) -> ObjectRow:
        _check_sha(sha256)
        row = session.get(ObjectRow, (org, sha256))
        if not self._visible(session, row):
            raise errors.NotFound()
        assert row is not None
        return row

    def _expiry(self, retention: Retention, stored: dt.datetime) -> dt.datetime | None:
        if retention.ttl_seconds is not None:
            return stored + dt.timedelta(seconds=retention.ttl_seconds)
        if self._config.retention_days > 0:
            return stored + dt.timedelta(days=self._config.retention_days)
        return None

    # -- grants ----------------------------------------------------------------------------

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
        if not SHA256.match(sha256):
            raise errors.ValidationError("sha256", "must be 64 lower-case hex digits")
        if not 1 <= size <= MAX_SIZE:
            raise errors.ValidationError("size", "must be between 1 byte and 64 GiB")
        meta = dict(meta or {})
        if len(meta) > 16 or any(
            not NAME.match(k) or not META_VALUE.match(v) for k, v in meta.items()
        ):
            raise errors.ValidationError("meta", "must hold at most 16 short, non-secret values")
        return self._retry(
            lambda: self._grant(
                principal.org, kind, name or kind, sha256, size, job_id, meta, principal, request_id
            )
        )

    def _grant(
        self, org: str, kind: str, name: str, sha256: str, size: int, job_id: str,
        meta: dict[str, str], principal: Principal, request_id: str,
    ) -> artifact_pb2.Grant:  # fmt: skip
        now = self._now()
        with self._store.unit() as session:
            retention = Retention("default", None)
            if job_id:
                job = session.get(JobRow, job_id) if ids.is_id(job_id, "job") else None
                if job is None or job.org != org:
                    raise errors.NotFound()
                spec_retention = (job.spec or {}).get("retention", {})
                retention = Retention(
                    spec_retention.get("policy_class", "standard"),
                    int(spec_retention["ttl_seconds"]) if "ttl_seconds" in spec_retention else None,
                )
            key = object_key(self._org_key(session, org, create=True), sha256)
            row = session.get(ObjectRow, (org, sha256), with_for_update=True)
            if row is not None and row.status == "stored":
                # The org holds these bytes (an identical run made them): the cheapest
                # path, the job names the object it already has.
                if job_id:
                    self._link(session, org, job_id, row, kind, name, retention)
                return artifact_pb2.Grant(sha256=sha256, stored=True)
            if row is not None and row.size != size:
                # The same sha256 cannot have two sizes; the earlier declaration is dropped.
                self._drop_pending(row)
                session.delete(row)
                session.flush()
                row = None
            pending = session.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(ObjectRow.size), 0)).where(
                    ObjectRow.org == org, ObjectRow.status == "pending", ObjectRow.sha256 != sha256
                )
            )
            if int(pending or 0) + size > PENDING_LIMIT_BYTES:
                raise errors.ResourceExhausted(
                    "The org holds too many granted, unconfirmed bytes.", reason="PENDING_LIMIT"
                )
            content_type = CONTENT_TYPES.get(kind, "application/x-tar")
            if row is None:
                row = ObjectRow(
                    org=org, sha256=sha256, id=ids.new_id("obj"), size=size, kind=kind, name=name,
                    status="pending", job_id=job_id, retention_policy=retention.policy,
                    ttl_seconds=retention.ttl_seconds, meta=meta, create_time=now,
                )  # fmt: skip
                session.add(row)
                audit.record(
                    session, "training.artifact.placeholder.registered", org=org, subject=row.id,
                    actor=principal.key_id, request_id=request_id, job=job_id or None,
                )  # fmt: skip
            if job_id:  # so each job granted these bytes may confirm them
                self._link(session, org, job_id, row, kind, name, retention)
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
        self, session: Session, org: str, job_id: str, row: ObjectRow, kind: str, name: str,
        retention: Retention | None = None,
    ) -> None:  # fmt: skip
        """Name the object as one the job produced; a stored object is kept at least as
        long as this job's retention asks."""
        if session.get(JobArtifactRow, (org, job_id, row.sha256)) is None:
            session.add(
                JobArtifactRow(
                    org=org,
                    job_id=job_id,
                    sha256=row.sha256,
                    kind=kind,
                    name=name,
                    create_time=self._now(),
                )
            )
        if retention is not None and row.status == "stored" and row.expires_at is not None:
            later = self._expiry(retention, self._now())
            row.expires_at = None if later is None else max(row.expires_at, later)

    # -- confirmation ----------------------------------------------------------------------

    def confirm(
        self, principal: Principal, sha256: str, *, job_id: str = ""
    ) -> artifact_pb2.Artifact:
        """Read the upload back; keep it only if it is exactly the bytes granted, sealed."""
        org = principal.org
        _check_sha(sha256)
        with self._store.unit(write=False) as session:
            row = session.get(ObjectRow, (org, sha256))
            if (
                row is None
                or row.status not in ("pending", "stored")
                or (job_id and session.get(JobArtifactRow, (org, job_id, sha256)) is None)
            ):
                raise errors.NotFound()
            key = object_key(self._org_key(session, org), sha256)
            upload_id, size, status = row.upload_id, row.size, row.status
        if status == "stored":
            if job_id:
                self._retry(lambda: self._confirm_link(org, sha256, job_id))
            return (
                self.describe(principal, sha256, with_url=False)
                if not job_id
                else self._job_artifact(org, job_id, sha256)
            )
        if upload_id and not self._objects.complete_multipart(org, sha256, upload_id, key):
            raise errors.FailedPrecondition(
                "The object's bytes have not arrived.", reason="ARTIFACT_NOT_UPLOADED"
            )
        back = self._objects.read_back(org, sha256, key)
        if back is None:
            raise errors.FailedPrecondition(
                "The object's bytes have not arrived.", reason="ARTIFACT_NOT_UPLOADED"
            )
        if back.sha256 != sha256 or back.size != size or not back.encrypted:
            self._objects.delete(org, sha256)
            self._retry(lambda: self._forget(org, sha256))
            raise errors.FailedPrecondition(
                "The uploaded bytes read back otherwise than granted and were deleted.",
                reason="ARTIFACT_MISMATCH",
            )
        self._retry(lambda: self._stored(org, sha256, job_id))
        if job_id:
            return self._job_artifact(org, job_id, sha256)
        return self.describe(principal, sha256, with_url=False)

    def _stored(self, org: str, sha256: str, job_id: str) -> None:
        with self._store.unit() as session:
            row = session.get(ObjectRow, (org, sha256), with_for_update=True)
            if row is None:
                raise errors.NotFound()
            if row.status != "stored":
                now = self._now()
                row.status, row.stored_time, row.upload_id, row.grant_expires = (
                    "stored",
                    now,
                    "",
                    None,
                )
                row.expires_at = self._expiry(Retention(row.retention_policy, row.ttl_seconds), now)
            if job_id:
                self._link(session, org, job_id, row, row.kind, row.name)

    def _confirm_link(self, org: str, sha256: str, job_id: str) -> None:
        with self._store.unit() as session:
            row = session.get(ObjectRow, (org, sha256))
            if row is None:
                raise errors.NotFound()
            self._link(session, org, job_id, row, row.kind, row.name)

    def _forget(self, org: str, sha256: str) -> None:
        """Drop an upload that never became an object, and the jobs' claims on it."""
        with self._store.unit() as session:
            row = session.get(ObjectRow, (org, sha256))
            if row is not None and row.status == "pending":
                session.delete(row)
                session.execute(
                    sa.delete(JobArtifactRow).where(
                        JobArtifactRow.org == org, JobArtifactRow.sha256 == sha256
                    )
                )

    # -- reads -----------------------------------------------------------------------------

    def _proto(self, session: Session, row: ObjectRow, *, with_url: bool) -> artifact_pb2.Artifact:
        out = artifact_pb2.Artifact(
            sha256=row.sha256, size=row.size, kind=row.kind, name=row.name, status=row.status,
            job_id=row.job_id, published=row.published, retention_policy=row.retention_policy,
            meta=row.meta or {}, create_time=_ts(row.stored_time or row.create_time),
        )  # fmt: skip
        if row.expires_at is not None:
            out.expires_at.CopyFrom(_ts(row.expires_at))
        if with_url:
            key = object_key(self._org_key(session, row.org), row.sha256)
            get = self._objects.presign_get(row.org, row.sha256, key, DOWNLOAD_SECONDS)
            out.url, out.expires = get.url, int(self._now().timestamp()) + DOWNLOAD_SECONDS
            out.headers.update(get.headers)
        return out

    def describe(
        self, principal: Principal, sha256: str, *, with_url: bool = True
    ) -> artifact_pb2.Artifact:
        with self._store.unit(write=False) as session:
            return self._proto(
                session, self._object(session, principal.org, sha256), with_url=with_url
            )

    def list_objects(
        self, principal: Principal, *, kind: str, size: int, token: str
    ) -> tuple[list[artifact_pb2.Artifact], str, int]:
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListArtifacts", "kind": kind}
        position = self._tokens.decode(token, scope)
        where = [ObjectRow.org == principal.org, ObjectRow.status == "stored"]
        if kind:
            where.append(ObjectRow.kind == kind)
        with self._store.unit(write=False) as session:
            rows = [
                r
                for r in session.scalars(
                    sa.select(ObjectRow)
                    .where(*where)
                    .order_by(ObjectRow.create_time.desc(), ObjectRow.sha256.desc())
                )
                if self._visible(session, r)
            ]
            start = 0
            if position:
                start = next(
                    (i + 1 for i, r in enumerate(rows) if r.sha256 == position.get("after")),
                    len(rows),
                )
            page = rows[start : start + limit]
            token_out = ""
            if start + limit < len(rows):
                token_out = self._tokens.encode({"after": page[-1].sha256}, scope)
            return [self._proto(session, r, with_url=False) for r in page], token_out, len(rows)

    def list_job_artifacts(self, principal: Principal, job_id: str) -> list[artifact_pb2.Artifact]:
        with self._store.unit(write=False) as session:
            self._job(session, principal, job_id)
            out = []
            for link in session.scalars(
                sa.select(JobArtifactRow)
                .where(JobArtifactRow.org == principal.org, JobArtifactRow.job_id == job_id)
                .order_by(JobArtifactRow.create_time)
            ):
                row = session.get(ObjectRow, (principal.org, link.sha256))
                if self._visible(session, row):
                    assert row is not None
                    item = self._proto(session, row, with_url=True)
                    item.kind, item.name, item.job_id = link.kind, link.name, job_id
                    item.provenance_record_id = link.provenance_record_id
                    out.append(item)
            return out

    def _job_artifact(self, org: str, job_id: str, sha256: str) -> artifact_pb2.Artifact:
        principal = Principal(key_id="", org=org, role="platform")
        for item in self.list_job_artifacts(principal, job_id):
            if item.sha256 == sha256:
                return item
        raise errors.NotFound()

    def _job(self, session: Session, principal: Principal, job_id: str) -> JobRow:
        row = session.get(JobRow, job_id) if ids.is_id(job_id, "job") else None
        if row is None or row.org != principal.org:
            raise errors.NotFound()
        return row

    def read(self, principal: Principal, sha256: str) -> Iterator[bytes]:
        """An object's plaintext, for the services that need its rows."""
        with self._store.unit(write=False) as session:
            row = self._object(session, principal.org, sha256)
            key = object_key(self._org_key(session, row.org), sha256)
        return self._objects.stream(principal.org, sha256, key)

    # -- provenance ------------------------------------------------------------------------

    def record_provenance(
        self, principal: Principal, record: provenance_pb2.ProvenanceRecord
    ) -> provenance_pb2.ProvenanceRecord:
        def work() -> provenance_pb2.ProvenanceRecord:
            with self._store.unit() as session:
                job = self._job(session, principal, record.job_id)
                existing = session.scalar(
                    sa.select(ProvenanceRow).where(ProvenanceRow.job_id == job.id)
                )
                if existing is not None:
                    return _provenance_proto(existing)
                link = session.get(JobArtifactRow, (principal.org, job.id, record.artifact_sha256))
                if link is None:
                    raise errors.ValidationError(
                        "record.artifact_sha256", "is not an artifact of the job"
                    )
                values = {
                    "id": ids.new_id("prv"),
                    "job_id": job.id,
                    "dataset_sha256": record.dataset_sha256,
                    "artifact_sha256": record.artifact_sha256,
                    "base_model_id": record.base_model_id,
                    "base_model_sha256": record.base_model_sha256,
                    "training_config_sha256": record.training_config_sha256,
                    "created_at": provenance.utc_now_text(),
                    "schema_version": provenance.SCHEMA_VERSION,
                }
                try:
                    provenance.validate_provenance_record(values)
                except provenance.ProvenanceError as exc:
                    raise errors.ValidationError(
                        f"record.{exc.field}", "is not in its form"
                    ) from None
                row = ProvenanceRow(org=principal.org, **values)
                session.add(row)
                link.provenance_record_id = row.id
                audit.record(
                    session, "training.artifact.provenance.recorded", org=principal.org, subject=job.id,
                    record=row.id,
                )  # fmt: skip
                return _provenance_proto(row)

        return self._retry(work)

    def job_provenance(self, principal: Principal, job_id: str) -> provenance_pb2.ProvenanceRecord:
        with self._store.unit(write=False) as session:
            job = self._job(session, principal, job_id)
            row = session.scalar(sa.select(ProvenanceRow).where(ProvenanceRow.job_id == job.id))
            if row is None:
                raise errors.NotFound()
            if not self._visible(session, session.get(ObjectRow, (job.org, row.artifact_sha256))):
                raise errors.NotFound()  # its artifact expired: evaluated on read
            return _provenance_proto(row)

    # -- deletion --------------------------------------------------------------------------

    def delete(
        self, principal: Principal, sha256: str, *, job_id: str = "", request_id: str = ""
    ) -> list[artifact_service_pb2.Cascaded]:
        """Delete an object and everything that names it, and the other objects the jobs
        that produced it made (their saved states, their snapshots) unless something else
        holds them; answers what the cascade reached. Repeating it is a no-op; an object
        the org never had is NOT_FOUND, as another org's is."""
        _check_sha(sha256)
        org = principal.org
        with self._store.unit(write=False) as session:
            if job_id:
                self._job(session, principal, job_id)
                if session.get(JobArtifactRow, (org, job_id, sha256)) is None:
                    if self._deleted_before(session, org, job_id):
                        return []
                    raise errors.NotFound()
            row = session.get(ObjectRow, (org, sha256))
            if row is None or row.status == "pending":
                if self._forgotten(session, org, sha256):
                    return []
                raise errors.NotFound()
            if row.published:
                raise errors.FailedPrecondition("The object is published.", reason="PUBLISHED")
            if self._in_use(session, org, sha256):
                raise errors.FailedPrecondition(
                    "A job that has not ended reads the object.", reason="IN_USE"
                )
        with self._store.unit() as session:
            row = session.get(ObjectRow, (org, sha256))
            if row is not None:
                audit.record(
                    session, "training.artifact.deleted", org=org, subject=row.id,
                    actor=principal.key_id, request_id=request_id,
                )  # fmt: skip
        return self._remove(org, sha256)

    def _deleted_before(self, session: Session, org: str, job_id: str) -> bool:
        job = session.get(JobRow, job_id)
        return bool(job and job.org == org and job.deleted)

    def _forgotten(self, session: Session, org: str, sha256: str) -> bool:
        """Whether the org deleted these bytes before (known by a keyed digest only)."""
        if session.get(OrgKeyRow, org) is None:
            return False
        digest = deleted_digest(self._org_key(session, org), sha256)
        return session.get(DeletedObjectRow, (org, digest)) is not None

    def _remove(self, org: str, sha256: str) -> list[artifact_service_pb2.Cascaded]:
        """The cascade: the object, and every other object the jobs that produced it
        made, unless it is published, read by a job that has not ended, or held by
        another job; each kept one is answered with the reason."""
        with self._store.unit(write=False) as session:
            producers = select_jobs_of(session, org, sha256)
            made = {
                link.sha256: link.kind
                for link in session.scalars(
                    sa.select(JobArtifactRow).where(
                        JobArtifactRow.org == org, JobArtifactRow.job_id.in_(producers)
                    )
                )
                if link.sha256 != sha256
            }
        self._erase(org, sha256)
        cascaded = []
        for other, kind in sorted(made.items()):
            with self._store.unit() as session:
                row = session.get(ObjectRow, (org, other))
                if row is None:
                    continue
                kept = (
                    "published"
                    if row.published
                    else "in_use"
                    if self._in_use(session, org, other)
                    else "held_by_another_job"
                    if select_jobs_of(session, org, other)
                    else ""
                )
                if not kept:  # on the trail before it is made, as every deletion is
                    audit.record(
                        session, "training.artifact.deleted", org=org, subject=row.id,
                        code="cascaded",
                    )  # fmt: skip
            if not kept:
                self._erase(org, other)
            cascaded.append(artifact_service_pb2.Cascaded(sha256=other, kind=kind, kept=kept))
        return cascaded

    def _erase(self, org: str, sha256: str) -> None:
        """One object gone: its bytes, its row, its job links and provenance, each
        producing job's request (left as a tombstone), and a digest that remembers the
        deletion without the hash."""
        self._objects.delete(org, sha256)

        def work() -> None:
            with self._store.unit() as session:
                for job_id in select_jobs_of(session, org, sha256):
                    job = session.get(JobRow, job_id, with_for_update=True)
                    session.execute(sa.delete(ProvenanceRow).where(ProvenanceRow.job_id == job_id))
                    session.execute(
                        sa.delete(JobArtifactRow).where(
                            JobArtifactRow.org == org, JobArtifactRow.job_id == job_id
                        )
                    )
                    if job is not None:
                        lifecycle.tombstone(session, job)
                session.execute(
                    sa.delete(ObjectRow).where(ObjectRow.org == org, ObjectRow.sha256 == sha256)
                )
                digest = deleted_digest(self._org_key(session, org), sha256)
                if session.get(DeletedObjectRow, (org, digest)) is None:
                    session.add(DeletedObjectRow(org=org, digest=digest, delete_time=self._now()))

        self._retry(work)

    # -- retention -------------------------------------------------------------------------

    def sweep(self) -> tuple[int, int]:
        """Delete expired objects nothing protects and lapsed, unconfirmed grants; each
        deletion is on the audit trail before it is made."""
        now = self._now()
        expired = lapsed = 0
        with self._store.unit(write=False) as session:
            stale = session.execute(
                sa.select(
                    ObjectRow.org,
                    ObjectRow.sha256,
                    ObjectRow.status,
                    ObjectRow.id,
                    ObjectRow.upload_id,
                ).where(
                    sa.or_(
                        sa.and_(ObjectRow.status == "pending", ObjectRow.grant_expires < now),
                        sa.and_(
                            ObjectRow.status == "stored",
                            ObjectRow.expires_at.is_not(None),
                            ObjectRow.expires_at <= now,
                            ObjectRow.published.is_(False),
                        ),
                    )
                )
            ).all()
            stale = [
                s
                for s in stale
                if s.status == "pending" or not self._in_use(session, s.org, s.sha256)
            ]
        for org, sha256, status, object_id, upload_id in stale:
            with self._store.unit() as session:
                audit.record(
                    session, "training.artifact.retention.swept", org=org, subject=object_id,
                    code="grant_lapsed" if status == "pending" else "expired",
                )  # fmt: skip
            if status == "pending":
                if upload_id:
                    self._objects.abort_multipart(org, sha256, upload_id)
                self._objects.delete(org, sha256)
                self._retry(functools.partial(self._forget, org, sha256))
                lapsed += 1
            else:
                self._remove(org, sha256)
                expired += 1
        return expired, lapsed


def select_jobs_of(session: Session, org: str, sha256: str) -> list[str]:
    """The jobs that name the object as one they produced."""
    return list(
        session.scalars(
            sa.select(JobArtifactRow.job_id).where(
                JobArtifactRow.org == org, JobArtifactRow.sha256 == sha256
            )
        )
    )


def _provenance_proto(row: ProvenanceRow) -> provenance_pb2.ProvenanceRecord:
    return provenance_pb2.ProvenanceRecord(
        id=row.id, job_id=row.job_id, dataset_sha256=row.dataset_sha256, artifact_sha256=row.artifact_sha256,
        base_model_id=row.base_model_id, base_model_sha256=row.base_model_sha256,
        training_config_sha256=row.training_config_sha256, created_at=row.created_at,
        schema_version=row.schema_version,
    )  # fmt: skip
