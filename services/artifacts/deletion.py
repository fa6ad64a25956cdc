"""Deletion: DeleteArtifact and DeleteJobArtifact (the cascade through the jobs that
produced an object), and the retention sweep (SweepArtifacts, and the server's hourly
loop) that deletes what expired. Every deletion is on the audit trail before it is made,
and none leaves the hash behind: a deleted object is remembered by a keyed digest only,
so repeating a deletion answers as done."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.artifacts import store
from services.artifacts.crypto import OrgKeys
from services.artifacts.objects import ObjectStore
from services.core import audit, errors, lifecycle
from services.core.auth import Principal
from services.core.object_tables import ObjectRow, fate, in_use, published
from services.core.states import ObjectStatus
from services.core.store import Store
from trainyard.artifact.v1 import artifact_service_pb2


def _refuse_kept(session: Session, row: ObjectRow) -> None:
    """An object a publication names, that a job which has not ended reads, or that the
    org pinned, is kept: unpinning it is the org's own decision, made first."""
    org, sha256 = row.org, row.sha256
    if published(session, org, sha256):
        raise errors.FailedPrecondition("The object is published.", reason="PUBLISHED")
    if in_use(session, org, sha256):
        raise errors.FailedPrecondition(
            "A job that has not ended reads the object.", reason="IN_USE"
        )
    if row.pinned:
        raise errors.FailedPrecondition("The object is pinned; unpin it first.", reason="PINNED")


class Deletion:
    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        keys: OrgKeys,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self._store = store
        self._objects = objects
        self._keys = keys
        self._now = clock

    def delete(
        self, principal: Principal, sha256: str, *, job_id: str = "", request_id: str = ""
    ) -> list[artifact_service_pb2.Cascaded]:
        """Delete an object and everything that names it, and the other objects the jobs
        that produced it made (their saved states, their snapshots) unless something else
        holds them; answers what the cascade reached. Repeating it is a no-op; an object
        the org never had is NOT_FOUND, as another org's is."""
        if not store.is_sha256(sha256):
            raise errors.NotFound()
        org = principal.org
        with self._store.unit(write=False) as session:
            if job_id:
                job = store.owned_job(session, org, job_id)
                if store.job_link(session, org, job_id, sha256) is None:
                    if job.deleted:  # its artifact went before: a tombstone now
                        return []
                    raise errors.NotFound()
            row = store.object_row(session, org, sha256)
            if row is None or row.status == ObjectStatus.PENDING:
                if self._forgotten(session, org, sha256):
                    return []
                raise errors.NotFound()
            _refuse_kept(session, row)
        with self._store.unit() as session:
            # Again under the object's lock, which a publish takes too: one that landed
            # since the read above keeps the object.
            row = store.object_row(session, org, sha256, lock=True)
            if row is not None:
                _refuse_kept(session, row)
                audit.record(
                    session,
                    "training.artifact.deleted",
                    org=org,
                    subject=row.id,
                    actor=principal.key_id,
                    request_id=request_id,
                )
        return self._remove(org, sha256)

    def _forgotten(self, session: Session, org: str, sha256: str) -> bool:
        """Whether the org deleted these bytes before (known by a keyed digest only)."""
        if not self._keys.exists(session, org):
            return False
        digest = self._keys.deleted_digest(session, org, sha256)
        return store.deletion_remembered(session, org, digest)

    def _remove(self, org: str, sha256: str) -> list[artifact_service_pb2.Cascaded]:
        """The cascade: the object, and every other object the jobs that produced it
        made, unless it is published, pinned, read by a job that has not ended, held by
        another job, or named as input by a live object's provenance; each kept one is
        answered with the reason."""
        with self._store.unit(write=False) as session:
            producers = store.jobs_of(session, org, sha256)
            made = {
                link.sha256: link.kind
                for link in store.links_of_jobs(session, org, producers)
                if link.sha256 != sha256
            }
        self._erase(org, sha256)
        cascaded = []
        for other, kind in sorted(made.items()):
            with self._store.unit() as session:
                row = store.object_row(session, org, other)
                if row is None:
                    continue
                kept = (
                    "published"
                    if published(session, org, other)
                    else "pinned"
                    if row.pinned
                    else "in_use"
                    if in_use(session, org, other)
                    else "held_by_another_job"
                    if store.jobs_of(session, org, other)
                    else "referenced"
                    if fate(session, row, self._now()).kept_by.startswith("object:")
                    else ""
                )
                if not kept:  # on the trail before it is made, as every deletion is
                    audit.record(
                        session,
                        "training.artifact.deleted",
                        org=org,
                        subject=row.id,
                        code="cascaded",
                    )
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
                for job_id in store.jobs_of(session, org, sha256):
                    job = store.lock_job(session, job_id)
                    store.drop_job_outputs(session, org, job_id)
                    if job is not None:
                        lifecycle.tombstone(session, job)
                store.delete_object(session, org, sha256)
                digest = self._keys.deleted_digest(session, org, sha256)
                store.remember_deletion(session, org, digest, self._now())

        store.retry(work)

    # -- retention -------------------------------------------------------------------------

    def sweep(self) -> tuple[int, int]:
        """Delete expired objects nothing keeps (`object_tables.fate`: pinned, published,
        read by a job, named by a live object's provenance) and lapsed, unconfirmed
        grants; each deletion is on the audit trail before it is made."""
        now = self._now()
        expired = lapsed = 0
        with self._store.unit(write=False) as session:
            stale = [s for s in store.stale_objects(session, now) if self._takes(session, s, now)]
        for org, sha256, status, object_id, upload_id in stale:
            with self._store.unit() as session:
                row = store.object_row(session, org, sha256, lock=True)
                if row is None or row.status != status:
                    continue  # deleted, or confirmed, since it was found
                if status != ObjectStatus.PENDING and not fate(session, row, now).expired(now):
                    continue  # pinned, published or extended since it was found: kept
                audit.record(
                    session,
                    "training.artifact.retention.swept",
                    org=org,
                    subject=object_id,
                    code="grant_lapsed" if status == ObjectStatus.PENDING else "expired",
                )
            if status == ObjectStatus.PENDING:
                if upload_id:
                    self._objects.abort_multipart(org, sha256, upload_id)
                self._objects.delete(org, sha256)
                store.retry(functools.partial(self._forget, org, sha256))
                lapsed += 1
            else:
                self._remove(org, sha256)
                expired += 1
        return expired, lapsed

    @staticmethod
    def _takes(
        session: Session, found: sa.Row[tuple[str, str, str, str, str]], now: dt.datetime
    ) -> bool:
        """Whether retention takes what `stale_objects` found: a lapsed grant always, an
        expired object unless something keeps it."""
        org, sha256, status = found[0], found[1], found[2]
        if status == ObjectStatus.PENDING:
            return True
        row = store.object_row(session, org, sha256)
        return row is not None and fate(session, row, now).expired(now)

    def _forget(self, org: str, sha256: str) -> None:
        with self._store.unit() as session:
            store.forget_pending(session, org, sha256)
