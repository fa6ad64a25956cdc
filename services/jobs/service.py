"""JobService's logic: create, read, list, cancel, retry, events, metrics, attempts,
dataset previews, and the preparation that snapshots a job's dataset. No gRPC here."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
from collections.abc import Mapping
from typing import Any, TypeVar

import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from services.core import audit, errors, ids, lifecycle
from services.core.auth import Principal
from services.core.config import Config
from services.core.pagetoken import PageTokens, page_size
from services.core.states import JOB_MOVES, RETRYABLE, TERMINAL, JobStatus
from services.core.store import Store, retrying, utcnow
from services.core.tables import (
    AttemptRow,
    EventRow,
    JobRow,
    MetricRow,
    SnapshotItemRow,
    SnapshotRow,
)
from services.jobs import sources, spec, view
from services.jobs.store import IdempotencyKey
from services.jobs.validation import (
    IDEMPOTENCY_KEY,
    check_identifier,
    check_typed_job,
    parse_json_job,
)
from trainyard.job.v1 import attempt_pb2, event_pb2, job_pb2, job_service_pb2
from trainyard.training import datasets, planning
from trainyard.training.catalog import Base, Catalog

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_DATASET_PAGE = 200
MAX_EVENTS_PAGE = 500
# A snapshotting job untouched this long is taken again (its preparer died or the store
# did not answer).
SNAPSHOT_STALL_SECONDS = 30
_PROTO_JSON = {"preserving_proto_field_name": True}


@dataclasses.dataclass(frozen=True)
class Admission:
    """What a create of a spec would freeze and whether it may run."""

    job: job_pb2.Job
    base: Base
    plan: planning.Plan
    stats: datasets.Stats
    workload_seconds: float
    projected_seconds: float
    limit_seconds: float

    @property
    def admitted(self) -> bool:
        return self.projected_seconds <= self.limit_seconds


def _org_lock_key(org: str) -> int:
    return int.from_bytes(hashlib.sha256(org.encode()).digest()[:8], "big", signed=True)


class JobService:
    def __init__(
        self,
        store: Store,
        catalog: Catalog,
        config: Config,
        tokens: PageTokens,
        reader: sources.DatasetReader | None = None,
        snapshots: sources.SnapshotKeeper | None = None,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._config = config
        self._tokens = tokens
        self._reader = reader
        self._snapshots = snapshots

    # -- transactions ----------------------------------------------------------------------

    def _lock_org(self, session: Session, org: str) -> None:
        """Serialise an org's creates and retries (its queue limit and numbering)."""
        if self._store.dialect == "postgresql":
            session.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _org_lock_key(org)})

    def _job(
        self, session: Session, principal: Principal, job_id: str, *, lock: bool = False
    ) -> JobRow:
        """The caller's job; another org's answers exactly as an unknown one. `lock` holds
        the row until the unit ends, so a writer's events follow each other in order."""
        row = (
            session.get(JobRow, job_id, with_for_update=lock) if ids.is_id(job_id, "job") else None
        )
        if row is None or row.org != principal.org:
            raise errors.NotFound()
        return row

    # -- admission ---------------------------------------------------------------------------

    def admit(self, principal: Principal, job: job_pb2.Job) -> Admission:
        """Validate and plan a spec as a create would, in HIP-1333 §3's order."""
        base = spec.validate(job, self._catalog)
        expanded = spec.expand(job, base)
        rows = sources.load(expanded.dataset.uri, principal.org, self._reader)
        try:
            stats = datasets.check(
                datasets.select(rows, expanded.dataset.tags),
                system_prompt=expanded.dataset.system_prompt,
                loss_mask=expanded.objective.loss_mask,
            )
        except datasets.DatasetError as exc:
            raise sources.domain_error(exc) from None
        bound = expanded.resources.steps if expanded.resources.HasField("steps") else None
        plan = planning.plan(stats.trainable_chats, expanded.hyperparameters, bound)
        workload = planning.workload_seconds(
            base.to_proto().profile.duration,
            plan.planned_steps,
            expanded.hyperparameters.max_seq_length,
        )
        _apply_plan(expanded, plan)
        return Admission(
            job=expanded,
            base=base,
            plan=plan,
            stats=stats,
            workload_seconds=workload,
            projected_seconds=planning.projected_active_seconds(workload),
            limit_seconds=float(self._config.execution_limit_seconds),
        )

    def estimate(
        self, principal: Principal, body: Mapping[str, Any] | None, typed: job_pb2.Job
    ) -> Admission:
        return self.admit(principal, self._parse(body, typed))

    def _parse(self, body: Mapping[str, Any] | None, typed: job_pb2.Job) -> job_pb2.Job:
        if body is not None:
            return parse_json_job(body)
        check_typed_job(typed)
        return typed

    # -- create ------------------------------------------------------------------------------

    def create(
        self,
        principal: Principal,
        body: Mapping[str, Any] | None,
        typed: job_pb2.Job,
        *,
        request_id: str = "",
    ) -> tuple[job_pb2.Job, bool]:
        try:
            request = self._parse(body, typed)
            admission = self.admit(principal, request)
            if not admission.admitted:
                raise _duration_error(admission)
            return retrying(lambda: self._insert(principal, request, admission, request_id))
        except errors.DomainError as exc:
            with self._store.unit() as session:
                audit.record(
                    session, "training.job.create.rejected", org=principal.org, code=exc.reason,
                    actor=principal.key_id, request_id=request_id,
                )  # fmt: skip
            raise

    def _insert(
        self, principal: Principal, request: job_pb2.Job, admission: Admission, request_id: str
    ) -> tuple[job_pb2.Job, bool]:
        org, key = principal.org, request.idempotency_key
        shape = spec.shape_sha256(request)
        job_id = ids.derived_id("job", org, key, shape) if key else ids.new_id("job")
        try:
            with self._store.unit() as session:
                self._lock_org(session, org)
                if key and (found := self._replay(session, org, key, shape)) is not None:
                    return view.job_proto(session, found), False
                self._check_queue(session, org)
                job = admission.job
                number = (
                    session.scalar(
                        sa.select(sa.func.max(JobRow.number)).where(
                            JobRow.org == org, JobRow.project == job.project
                        )
                    )
                    or 0
                ) + 1
                if not job.output.name:
                    job.output.name = f"{job.project}-{number}"
                now = utcnow()
                row = JobRow(
                    id=job_id, org=org, project=job.project, number=number, status="queued",
                    spec=_spec_json(job), spec_sha256=spec.canonical_sha256(_training_config(job)),
                    plan=_plan_json(admission), preparation={"status": "queued"},
                    requested_by=job.requested_by, attempt_count=1, event_seq=0,
                    reads_sha256=spec.artifact_sha256(job.dataset.uri) or "",
                    create_time=now, update_time=now,
                )  # fmt: skip
                session.add(row)
                session.flush()  # the job before what refers to it
                session.add(
                    AttemptRow(
                        id=ids.new_id("att"), job_id=job_id, org=org, attempt_number=1,
                        status="queued", create_time=now,
                    )
                )  # fmt: skip
                if key:
                    session.add(
                        IdempotencyKey(
                            org=org, method="CreateJob", key=key, request_sha256=shape,
                            resource_id=job_id, create_time=now,
                        )
                    )  # fmt: skip
                session.flush()
                lifecycle.append_event(
                    session, row, "transition", attempt=1, status="queued", reason="created"
                )
                audit.record(
                    session, "training.job.create.accepted", org=org, subject=job_id,
                    actor=principal.key_id, request_id=request_id,
                )  # fmt: skip
                return view.job_proto(session, row), True
        except IntegrityError:
            if not key:
                raise
            # A concurrent create with the same key won; answer what it made.
            with self._store.unit(write=False) as session:
                found = self._replay(session, org, key, shape)
                if found is None:
                    raise errors.Conflict() from None
                return view.job_proto(session, found), False

    def _replay(self, session: Session, org: str, key: str, shape: str) -> JobRow | None:
        used = session.get(IdempotencyKey, (org, "CreateJob", key))
        if used is None:
            return None
        if used.request_sha256 != shape:
            raise errors.AlreadyExists(
                "The idempotency key was used with another request.",
                reason="IDEMPOTENCY_KEY_REUSED",
                metadata={"field": "idempotency_key"},
            )
        return session.get(JobRow, used.resource_id)

    def _check_queue(self, session: Session, org: str) -> None:
        open_jobs = session.scalar(
            sa.select(sa.func.count())
            .select_from(JobRow)
            .where(JobRow.org == org, JobRow.status.not_in(TERMINAL))
        )
        if (open_jobs or 0) >= self._config.queue_limit:
            raise errors.ResourceExhausted(
                "The org already has its most jobs that have not ended.",
                reason="QUEUE_LIMIT_EXCEEDED",
                metadata={"limit": str(self._config.queue_limit)},
            )

    # -- reads -------------------------------------------------------------------------------

    def get(
        self, principal: Principal, job_id: str, identifier: str = "", project: str = ""
    ) -> job_pb2.Job:
        with self._store.unit(write=False) as session:
            row: JobRow | None
            if identifier in ("", "id"):
                row = self._job(session, principal, job_id)
            elif identifier == "number":
                row = None
                if job_id.isdigit() and len(job_id) <= 18:
                    row = session.scalar(
                        sa.select(JobRow).where(
                            JobRow.org == principal.org,
                            JobRow.project == (project or spec.DEFAULT_PROJECT),
                            JobRow.number == int(job_id),
                        )
                    )
                if row is None:
                    raise errors.NotFound()
            else:
                raise errors.ValidationError("identifier", "must be id or number")
            return view.job_proto(session, row, preview=True)

    def list_jobs(
        self, principal: Principal, *, status: str, project: str, size: int, token: str
    ) -> tuple[list[job_pb2.Job], str, int]:
        if status and status not in JOB_MOVES:
            raise errors.ValidationError("status", "is not a job status")
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListJobs", "status": status, "project": project}
        position = self._tokens.decode(token, scope)
        where = [JobRow.org == principal.org]
        if status:
            where.append(JobRow.status == status)
        if project:
            where.append(JobRow.project == project)
        with self._store.unit(write=False) as session:
            total = (
                session.scalar(sa.select(sa.func.count()).select_from(JobRow).where(*where)) or 0
            )
            query = sa.select(JobRow).where(*where)
            if position:
                after = dt.datetime.fromisoformat(str(position["t"]))
                query = query.where(
                    sa.or_(
                        JobRow.create_time < after,
                        sa.and_(JobRow.create_time == after, JobRow.id < str(position["id"])),
                    )
                )
            rows = session.scalars(
                query.order_by(JobRow.create_time.desc(), JobRow.id.desc()).limit(limit + 1)
            ).all()
            jobs = [view.job_proto(session, row) for row in rows[:limit]]
            next_token = ""
            if len(rows) > limit:
                last = rows[limit - 1]
                next_token = self._tokens.encode(
                    {"t": last.create_time.isoformat(), "id": last.id}, scope
                )
            return jobs, next_token, total

    # -- cancel and retry --------------------------------------------------------------------

    def cancel(self, principal: Principal, job_id: str, *, request_id: str = "") -> job_pb2.Job:
        def work() -> tuple[job_pb2.Job, errors.DomainError | None]:
            with self._store.unit() as session:
                row = self._job(session, principal, job_id, lock=True)
                refusal: errors.DomainError | None = None
                try:
                    lifecycle.cancel(session, row, actor=principal.key_id, request_id=request_id)
                except errors.DomainError as exc:
                    refusal = exc
                name = "training.job.cancel.rejected" if refusal else "training.job.cancel.accepted"
                audit.record(
                    session, name, org=row.org, subject=row.id, code=refusal.reason if refusal else "",
                    actor=principal.key_id, request_id=request_id,
                )  # fmt: skip
                return view.job_proto(session, row), refusal

        job, refusal = retrying(work)
        if refusal:
            raise refusal
        return job

    def retry(
        self, principal: Principal, job_id: str, *, key: str, resume: bool, request_id: str = ""
    ) -> tuple[job_pb2.Job, attempt_pb2.Attempt]:
        if not key:
            raise errors.ValidationError(
                "idempotency_key", "is required (or the Idempotency-Key header)"
            )
        check_identifier("idempotency_key", key, IDEMPOTENCY_KEY, "a safe identifier")

        def work() -> tuple[job_pb2.Job, attempt_pb2.Attempt]:
            with self._store.unit() as session:
                self._lock_org(session, principal.org)
                row = self._job(session, principal, job_id, lock=True)
                earlier = session.scalar(
                    sa.select(AttemptRow).where(
                        AttemptRow.job_id == row.id, AttemptRow.idempotency_key == key
                    )
                )
                if earlier is not None:
                    if earlier.resume_from_checkpoint != resume:
                        raise errors.AlreadyExists(
                            "The idempotency key was used with another request.",
                            reason="IDEMPOTENCY_KEY_REUSED",
                            metadata={"field": "idempotency_key"},
                        )
                    return view.job_proto(session, row), _attempt_proto(earlier)
                if row.status not in RETRYABLE or row.deleted:
                    raise errors.InvalidTransition("Only a failed or cancelled job can be retried.")
                checkpoint = (row.result or {}).get("checkpoint_sha256", "")
                if resume and not checkpoint:
                    raise errors.FailedPrecondition(
                        "The job has no verified checkpoint to resume from.",
                        reason="CHECKPOINT_UNAVAILABLE",
                    )
                plan = row.plan
                if plan.get("projected_seconds", 0) > self._config.execution_limit_seconds:
                    raise errors.FailedPrecondition(
                        "The projected run exceeds the execution limit.",
                        reason="DURATION_EXCEEDS_LIMIT",
                    )
                self._check_queue(session, principal.org)
                attempt = AttemptRow(
                    id=ids.new_id("att"), job_id=row.id, org=row.org,
                    attempt_number=row.attempt_count + 1, status="queued", idempotency_key=key,
                    resume_from_checkpoint=resume,
                    resume_step=int((row.result or {}).get("checkpoint_step", 0)) if resume else None,
                    create_time=utcnow(),
                )  # fmt: skip
                session.add(attempt)
                session.flush()
                lifecycle.requeue(session, row, attempt, actor=principal.key_id)
                return view.job_proto(session, row), _attempt_proto(attempt)

        return retrying(work)

    # -- events, metrics, attempts -----------------------------------------------------------

    def events(
        self, principal: Principal, job_id: str, *, after: int, size: int
    ) -> tuple[list[event_pb2.JobEvent], str]:
        if after < 0:
            raise errors.ValidationError("after", "must not be negative")
        limit = page_size(size, default=100, maximum=MAX_EVENTS_PAGE)
        with self._store.unit(write=False) as session:
            row = self._job(session, principal, job_id)
            found = session.scalars(
                sa.select(EventRow)
                .where(EventRow.job_id == row.id, EventRow.seq > after)
                .order_by(EventRow.seq)
                .limit(limit)
            ).all()
            return [_event_proto(e) for e in found], row.status

    def job_version(self, principal: Principal, job_id: str) -> tuple[int, str]:
        """A cheap read of a job's version and status, for watchers."""
        with self._store.unit(write=False) as session:
            row = self._job(session, principal, job_id)
            return row.version, row.status

    def metrics(
        self, principal: Principal, job_id: str, *, names: list[str], after_step: int
    ) -> list[event_pb2.MetricSeries]:
        with self._store.unit(write=False) as session:
            row = self._job(session, principal, job_id)
            query = sa.select(MetricRow).where(
                MetricRow.job_id == row.id, MetricRow.step > after_step
            )
            if names:
                query = query.where(MetricRow.name.in_(names))
            series: dict[str, event_pb2.MetricSeries] = {}
            for point in session.scalars(
                query.order_by(MetricRow.name, MetricRow.attempt_number, MetricRow.step)
            ):
                out = series.setdefault(point.name, event_pb2.MetricSeries(name=point.name))
                out.points.add(
                    step=point.step, value=point.value, create_time=view.ts(point.create_time)
                )
            return list(series.values())

    def attempts(self, principal: Principal, job_id: str) -> list[attempt_pb2.Attempt]:
        with self._store.unit(write=False) as session:
            row = self._job(session, principal, job_id)
            found = session.scalars(
                sa.select(AttemptRow)
                .where(AttemptRow.job_id == row.id)
                .order_by(AttemptRow.attempt_number)
            ).all()
            return [_attempt_proto(a) for a in found]

    # -- the snapshot a job trained on -------------------------------------------------------

    def dataset_items(
        self, principal: Principal, job_id: str, *, offset: int, limit: int, search: str, split: str
    ) -> job_service_pb2.ListJobDatasetItemsResponse:
        if offset < 0:
            raise errors.ValidationError("offset", "must not be negative")
        limit = page_size(limit, default=25, maximum=MAX_DATASET_PAGE)
        split = split or "all"
        if split not in ("all", "train", "eval"):
            raise errors.ValidationError("split", "must be all, train or eval")
        if len(search) > 200:
            raise errors.ValidationError("search", "must be at most 200 characters")
        with self._store.unit(write=False) as session:
            row = self._job(session, principal, job_id)
            where = [
                SnapshotItemRow.org == row.org,
                SnapshotItemRow.snapshot_sha256 == row.dataset_sha256,
            ]
            if split != "all":
                where.append(SnapshotItemRow.split == split)
            if search:
                pattern = (
                    "%"
                    + search.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                    + "%"
                )
                where.append(SnapshotItemRow.search_text.like(pattern, escape="\\"))
            items = session.scalars(
                sa.select(SnapshotItemRow)
                .where(*where)
                .order_by(SnapshotItemRow.position)
                .offset(offset)
                .limit(limit + 1)
            ).all()
            answer = job_service_pb2.ListJobDatasetItemsResponse(
                items=[view.item_proto(i, messages=False) for i in items[:limit]],
                offset=offset,
                limit=limit,
                has_more=len(items) > limit,
                search_applied=bool(search),
                split=split,
            )
            if not search:  # a search is not counted (002: no second pass over the shards)
                answer.total = (
                    session.scalar(
                        sa.select(sa.func.count()).select_from(SnapshotItemRow).where(*where)
                    )
                    or 0
                )
            if answer.has_more:
                answer.next_offset = offset + limit
            return answer

    def dataset_item(self, principal: Principal, job_id: str, item_id: str) -> job_pb2.DatasetItem:
        with self._store.unit(write=False) as session:
            row = self._job(session, principal, job_id)
            item = session.scalar(
                sa.select(SnapshotItemRow).where(
                    SnapshotItemRow.org == row.org,
                    SnapshotItemRow.snapshot_sha256 == row.dataset_sha256,
                    SnapshotItemRow.item_id == item_id,
                )
            )
            if item is None:
                raise errors.NotFound()
            return view.item_proto(item, messages=True)

    # -- preparation -------------------------------------------------------------------------

    def prepare_next(self) -> bool:
        """Move the oldest queued job into preparation and snapshot its dataset; False when
        nothing was waiting. A job whose snapshotting stalled (its preparer died, or the
        store was unreachable) is taken again once it has been quiet for a while. Safe with
        several replicas: the job's row lock, taken first as every writer of its events
        does, decides."""
        stalled = utcnow() - dt.timedelta(seconds=SNAPSHOT_STALL_SECONDS)
        with self._store.unit() as session:
            row = session.scalar(
                sa.select(JobRow)
                .where(
                    sa.or_(
                        JobRow.status == JobStatus.QUEUED,
                        sa.and_(
                            JobRow.status == JobStatus.PREPARING,
                            JobRow.dataset_sha256 == "",
                            JobRow.update_time < stalled,
                        ),
                    )
                )
                .order_by(JobRow.create_time)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            if row is None:
                return False
            job_id, org = row.id, row.org
            try:
                verified = lifecycle.start_preparation(session, row)
                spec_json = dict(row.spec or {})
            except StaleDataError:
                return True
        if verified:
            return True
        try:
            job = json_format.ParseDict(spec_json, job_pb2.Job(), ignore_unknown_fields=True)
            rows = sources.load(job.dataset.uri, org, self._reader)
            snapshot = datasets.build_snapshot(
                datasets.select(rows, job.dataset.tags), job.objective.loss_mask
            )
            if self._snapshots is not None:
                self._snapshots.keep(org, job_id, snapshot.sha256, snapshot.data)
        except (errors.DomainError, datasets.DatasetError) as exc:
            if exc.reason == "UNAVAILABLE":
                # Nothing is wrong with the input: the job stays snapshotting and is taken
                # again once the store answers.
                log.warning("job %s: the dataset could not be read or kept yet", job_id)
                return True
            code = exc.reason.lower()
            retrying(lambda: self._preparation_failed(job_id, code))
            return True
        retrying(lambda: self._preparation_done(job_id, org, snapshot))
        return True

    def _preparation_done(self, job_id: str, org: str, snapshot: datasets.Snapshot) -> None:
        with self._store.unit() as session:
            if session.get(SnapshotRow, (org, snapshot.sha256)) is None:
                now = utcnow()
                session.add(
                    SnapshotRow(
                        org=org, sha256=snapshot.sha256, item_count=len(snapshot.items),
                        message_count=snapshot.message_count, size=len(snapshot.data), create_time=now,
                    )
                )  # fmt: skip
                session.flush()
                session.add_all(
                    SnapshotItemRow(
                        org=org, snapshot_sha256=snapshot.sha256, position=position, item_id=item.id,
                        name=item.name, split=split, message_count=len(item.messages),
                        messages=[{"role": r, "content": c} for r, c in item.messages],
                        search_text=" ".join([item.name, *(c for _, c in item.messages)]).lower(),
                    )
                    for position, (item, split) in enumerate(snapshot.items)
                )  # fmt: skip
            row = session.get(JobRow, job_id, with_for_update=True)
            if row is None or row.status != JobStatus.PREPARING:
                return  # cancelled meanwhile: the snapshot stays, unused
            lifecycle.snapshot_verified(session, row, snapshot.sha256, len(snapshot.items))

    def _preparation_failed(self, job_id: str, code: str) -> None:
        with self._store.unit() as session:
            row = session.get(JobRow, job_id, with_for_update=True)
            if row is None or row.status != JobStatus.PREPARING:
                return
            lifecycle.preparation_failed(session, row, code)

    # -- proto -------------------------------------------------------------------------------


def _duration_error(admission: Admission) -> errors.DomainError:
    return errors.FailedPrecondition(
        "The projected run exceeds the execution limit.",
        reason="DURATION_EXCEEDS_LIMIT",
        metadata={
            "projected_seconds": f"{admission.projected_seconds:.0f}",
            "execution_limit_seconds": f"{admission.limit_seconds:.0f}",
        },
    )


def _apply_plan(job: job_pb2.Job, plan: planning.Plan) -> None:
    job.planned_steps = plan.planned_steps
    job.steps_per_epoch = plan.steps_per_epoch
    job.effective_batch_size = plan.effective_batch_size
    job.train_examples = plan.train_examples
    job.eval_examples = plan.eval_examples


_PLAN_FIELDS = (
    "planned_steps",
    "steps_per_epoch",
    "effective_batch_size",
    "train_examples",
    "eval_examples",
)


def _spec_only(job: job_pb2.Job) -> job_pb2.Job:
    """The frozen spec without the plan: what the training config hash covers."""
    out = job_pb2.Job()
    out.CopyFrom(job)
    for name in _PLAN_FIELDS:
        out.ClearField(name)  # type: ignore[arg-type]
    return out


def _training_config(job: job_pb2.Job) -> job_pb2.Job:
    """What the training config hash of provenance covers: the spec minus its labels."""
    out = _spec_only(job)
    for name in ("idempotency_key", "requested_by", "project"):
        out.ClearField(name)  # type: ignore[arg-type]
    return out


def _spec_json(job: job_pb2.Job) -> dict[str, Any]:
    return json_format.MessageToDict(_spec_only(job), **_PROTO_JSON)  # type: ignore[arg-type]


def _plan_json(admission: Admission) -> dict[str, Any]:
    plan = dataclasses.asdict(admission.plan)
    plan["downgrades"] = list(admission.plan.downgrades)
    plan["projected_seconds"] = admission.projected_seconds
    return plan


def _attempt_proto(row: AttemptRow) -> attempt_pb2.Attempt:
    out = attempt_pb2.Attempt(
        id=row.id, job_id=row.job_id, attempt_number=row.attempt_number, status=row.status,
        resume_from_checkpoint=row.resume_from_checkpoint, failure_code=row.failure_code,
        failure_category=row.failure_category, failure_message=row.failure_message,
    )  # fmt: skip
    if row.resume_step is not None:
        out.resume_step = row.resume_step
    for name in ("create_time", "leased_time", "started_time", "finalizing_time", "end_time"):
        if (value := getattr(row, name)) is not None:
            getattr(out, name).CopyFrom(view.ts(value))
    return out


def _event_proto(row: EventRow) -> event_pb2.JobEvent:
    out = event_pb2.JobEvent(seq=row.seq, type=row.type, attempt_number=row.attempt_number)
    json_format.ParseDict(row.data, out, ignore_unknown_fields=True)
    out.create_time.CopyFrom(view.ts(row.create_time))
    return out
