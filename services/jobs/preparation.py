"""Preparation: a queued job's dataset read, selected and snapshotted, the snapshot kept as
an object the job holds, and the job moved on (`002_…` "Preparação"). The server's
background loop calls `prepare_next` until nothing waits; a create takes a job on rows
built in code itself, in its own transaction (`start`, then `finish` once it commits).
The moves are `lifecycle`'s `start_preparation`, `snapshot_verified` and
`preparation_failed`.

The same rows make the same snapshot: when the org stores its bytes already (a job on the
same data before), the job holds that object in the transaction that verifies it, and
only new bytes are granted and uploaded through ArtifactService first."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import logging

from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from services.core import errors, lifecycle, retention, trace
from services.core.object_tables import ObjectRow
from services.core.states import JobStatus
from services.core.store import Store, retrying, utcnow
from services.core.tables import JobRow
from services.jobs import remote, snapshots, sources, store
from services.jobs.data_sources import UnknownSource
from trainyard.job.v1 import job_pb2
from trainyard.training import datasets
from trainyard.training.catalog import Catalog

log = logging.getLogger(__name__)

# A snapshotting job untouched this long is taken again (its preparer died or the store
# did not answer).
SNAPSHOT_STALL_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class Taken:
    """A job a unit took for preparation: what `Preparation.finish` needs once it commits."""

    job_id: str
    org: str
    job: job_pb2.Job
    kind: str
    # The snapshot made in that unit, if any; `verified` when the unit verified it.
    snapshot: datasets.Snapshot | None
    verified: bool


class Preparation:
    def __init__(
        self,
        store: Store,
        reader: sources.DatasetReader | None,
        snapshots: sources.SnapshotKeeper | None,
        catalog: Catalog,
        retention_days: int = 0,
        data_sources: remote.SourceCredentials | None = None,
    ) -> None:
        self._store = store
        self._sources = data_sources
        self._catalog = catalog
        self._reader = reader
        self._snapshots = snapshots
        self._retention_days = retention_days

    def at_hand(self, job: job_pb2.Job) -> bool:
        """Whether the job's rows are built in code: its create takes it for preparation
        in its own unit (`start`), with no hand-off to the background loop."""
        return sources.at_hand(job.dataset, self._kind(job))

    def prepare_next(self) -> bool:
        """Move the oldest queued job into preparation and snapshot its dataset; False when
        nothing was waiting. A job whose snapshotting stalled (its preparer died, or the
        store was unreachable) is taken again once it has been quiet for a while. Safe with
        several replicas: the job's row lock, taken first as every writer of its events
        does, decides."""
        stalled = utcnow() - dt.timedelta(seconds=SNAPSHOT_STALL_SECONDS)
        try:
            # Written once, at the commit: the job's two moves are one update of its row.
            with self._store.unit() as session, session.no_autoflush:
                row = store.next_to_prepare(session, stalled)
                if row is None:
                    return False
                taken = self.start(session, row)
        except StaleDataError:
            return True
        self.finish(taken)
        return True

    def start(self, session: Session, row: JobRow, *, created: bool = False) -> Taken:
        """In the caller's unit, which holds the job's row (the loop's, or the create's
        own, `created`): the job taken for preparation. Rows built in code wait on
        nothing: such a job is verified in the same unit, once the org stores the
        snapshot's bytes."""
        trace.hop("preparation.started", job=row.id)
        verified = lifecycle.start_preparation(session, row)
        job = row.frozen()
        kind = self._kind(job)
        snapshot: datasets.Snapshot | None = None
        if not verified and sources.at_hand(job.dataset, kind):
            # A refused selection is refused by `finish`, as any source's is.
            with contextlib.suppress(errors.DomainError, datasets.DatasetError):
                snapshot = self._snapshot(job, row.org, kind)
            if snapshot is not None:
                kept, listed = (
                    snapshots.stored_and_listed(session, row.org, snapshot.sha256)
                    if self._snapshots is not None
                    else (None, False)
                )
                if not listed:
                    snapshots.add_snapshot(session, row.org, snapshot, utcnow())
                verified = self._verify(session, row, snapshot, kept, created=created)
        return Taken(row.id, row.org, job, kind, snapshot, verified)

    def finish(self, taken: Taken) -> None:
        """Once the unit that took the job committed: unless it was verified there, its
        snapshot is read and kept, and the job verified (or failed, or left to be taken
        again when the store does not answer)."""
        if taken.verified:
            return
        job_id, org = taken.job_id, taken.org
        try:
            snapshot = taken.snapshot or self._snapshot(taken.job, org, taken.kind)
            if not retrying(lambda: self._done(job_id, org, snapshot)):
                assert self._snapshots is not None
                self._snapshots.keep(org, job_id, snapshot.sha256, snapshot.data)
                retrying(lambda: self._done(job_id, org, snapshot))
        except (remote.Unreadable, UnknownSource) as unreadable:
            # The source would not give the bytes the job was created on: nothing ran.
            category = getattr(unreadable, "category", "deleted")
            retrying(lambda: self._failed(job_id, f"source_{category}"))
        except (errors.DomainError, datasets.DatasetError) as exc:
            if exc.reason == "UNAVAILABLE":
                # Nothing is wrong with the input: the job stays snapshotting and is taken
                # again once the store answers.
                log.warning("job %s: the dataset could not be read or kept yet", job_id)
                return
            if exc.reason == "CONFLICT":
                return  # lost to other writers: taken again once it stalls
            code = exc.reason.lower()
            retrying(lambda: self._failed(job_id, code))

    def _kind(self, job: job_pb2.Job) -> str:
        """The rows the job's base reads (`catalog.Base.rows`)."""
        base = self._catalog.get(job.base_model)
        return base.rows if base is not None else "chat"

    def _snapshot(self, job: job_pb2.Job, org: str, kind: str) -> datasets.Snapshot:
        if sources.at_hand(job.dataset, kind):
            return _built_in(
                job.dataset.uri, kind, tuple(job.dataset.tags), job.objective.loss_mask
            )
        rows = sources.load(job.dataset, org, self._reader, kind, self._sources)
        return datasets.build_snapshot(
            datasets.select(rows, job.dataset.tags), job.objective.loss_mask, sources.held_out(kind)
        )

    def _done(self, job_id: str, org: str, snapshot: datasets.Snapshot) -> bool:
        """Verify the job's snapshot, the job holding its object; False, with nothing
        verified, when the org does not store its bytes yet (they are kept first)."""
        with self._store.unit() as session:
            snapshots.add_snapshot(session, org, snapshot, utcnow())
            row = store.job_by_id(session, job_id, lock=True)
            if row is None or row.status != JobStatus.PREPARING:
                return True  # cancelled meanwhile: the snapshot stays, unused
            kept = (
                lifecycle.stored_object(session, org, snapshot.sha256)
                if self._snapshots is not None
                else None
            )
            return self._verify(session, row, snapshot, kept)

    def _verify(
        self,
        session: Session,
        row: JobRow,
        snapshot: datasets.Snapshot,
        kept: ObjectRow | None,
        *,
        created: bool = False,
    ) -> bool:
        """In the unit that holds the preparing job's row (`created`: the unit that made
        it), its snapshot's rows added and `kept`, the org's stored object of its bytes,
        locked: the snapshot verified, the job holding its object; False, with nothing
        verified, when the org does not store the bytes yet."""
        if self._snapshots is not None:
            if kept is None:
                return False
            lifecycle.hold(
                session,
                kept,
                row.id,
                kind="snapshot",
                name="snapshot",
                now=utcnow(),
                kept=retention.of_job(row),
                default_days=self._retention_days,
                new_holder=created,
            )
        lifecycle.snapshot_verified(session, row, snapshot.sha256, len(snapshot.items))
        return True

    def _failed(self, job_id: str, code: str) -> None:
        with self._store.unit() as session:
            row = store.job_by_id(session, job_id, lock=True)
            if row is None or row.status != JobStatus.PREPARING:
                return
            lifecycle.preparation_failed(session, row, code)


@functools.lru_cache(maxsize=32)
def _built_in(uri: str, kind: str, tags: tuple[str, ...], loss_mask: str) -> datasets.Snapshot:
    """The snapshot of a dataset built in code, made once a process for what selects it
    (its rows are the same each time; a job's preparation took 2 ms building it)."""
    rows = sources.load(job_pb2.Dataset(uri=uri), "", None, kind)
    return datasets.build_snapshot(
        datasets.select(rows, list(tags)), loss_mask, sources.held_out(kind)
    )
