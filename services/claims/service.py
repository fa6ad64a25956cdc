"""ClaimService's logic, shared by the executor stream and the unary REST routes: who may
claim what, leases with fencing, reports applied once each, and the expiry sweep.

The lease row is the truth. Every side effect of a report checks, in its own
transaction, that the lease presented is the task's current one and has not lapsed;
a report under any other lease is LEASE_LOST and changes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from services.claims.store import ExecutorRow
from services.core import audit, errors, ids, lifecycle, view
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.states import STOPPING, TERMINAL, JobStatus, TaskStatus
from services.core.store import Store, retrying, utcnow
from services.core.tables import AttemptRow, JobRow, MetricRow, TaskRow
from trainyard.artifact.v1 import artifact_pb2, artifact_service_pb2, provenance_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.training.catalog import Catalog

log = logging.getLogger(__name__)
T = TypeVar("T")

DEVICE_KINDS = ("cuda", "rocm", "metal", "vulkan", "cpu")
MACHINE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")
ADDR = re.compile(r"^[A-Za-z0-9.-]{1,253}:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$")
CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_EVENTS = 500
MAX_LOG_BYTES = 4096
MAX_JOB_EVENTS = 100_000
CANCEL_GRACE_SECONDS = 60
LEAD_STATUSES = (
    "accepted",
    "running",
    "evaluating",
    "finalizing",
    "failed",
    "stopped",
    "cancelled",
)
JOIN_STATUSES = ("done", "failed", "stopped")
_PROGRESS_FIELDS = {
    "loss": "loss",
    "eval_loss": "eval_loss",
    "learning_rate": "learning_rate",
    "tokens_per_second": "tokens_per_second",
}
# Refusals of another service that a later try may not meet.
TRANSIENT = frozenset({"UNAVAILABLE", "CONFLICT"})


@dataclasses.dataclass(frozen=True)
class Offer:
    """What a claiming executor is and runs (HIP-1333 §5)."""

    machine: str
    platform: bool
    bases: tuple[str, ...]
    devices: tuple[str, ...]
    adaptations: tuple[str, ...]
    outputs: tuple[str, ...]
    protect: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()

    @classmethod
    def parse(
        cls,
        machine: str,
        platform: bool,
        bases: Iterable[str],
        devices: Iterable[str],
        supports: task_pb2.Supports,
    ) -> Offer:
        if not MACHINE.match(machine):
            raise errors.ValidationError("machine", "must be a machine name")
        devices = tuple(devices)
        if not 1 <= len(devices) <= 64 or any(d not in DEVICE_KINDS for d in devices):
            raise errors.ValidationError(
                "devices", "must list 1 to 64 of cuda, rocm, metal, vulkan, cpu"
            )
        words = [
            *bases,
            *supports.adaptations,
            *supports.outputs,
            *supports.protect,
            *supports.terms,
        ]
        if len(words) > 256 or any(not re.match(r"^[A-Za-z0-9._/-]{1,128}$", w) for w in words):
            raise errors.ValidationError("supports", "must hold short names")
        return cls(
            machine, platform, tuple(bases), devices, tuple(supports.adaptations), tuple(supports.outputs),
            tuple(supports.protect), tuple(supports.terms),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Effects:
    """What ArtifactService made of a report's outputs before it is applied."""

    # The provenance record of each finished run's output, by its sha256.
    provenance: dict[str, str] = dataclasses.field(default_factory=dict)
    # Outputs that did not read back as uploaded (deleted by ArtifactService).
    refused: set[str] = dataclasses.field(default_factory=set)

    def refuses(self, event: task_pb2.TaskEvent) -> bool:
        named = event.sha256 if event.type == "artifact" else event.result.sha256
        return event.type in ("artifact", "result") and named in self.refused


def lease_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ClaimService:
    def __init__(
        self,
        store: Store,
        config: Config,
        artifacts: ArtifactClient | None = None,
        catalog: Catalog | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._store = store
        self._config = config
        self._artifacts = artifacts
        self._catalog = catalog or Catalog()
        self._now = clock

    @property
    def ttl(self) -> dt.timedelta:
        return dt.timedelta(seconds=self._config.lease_ttl_seconds)

    def hello(
        self, principal: Principal, offer: Offer, leases: Sequence[tuple[str, str]]
    ) -> tuple[str, list[str], list[str]]:
        """Register a connecting executor; sort the leases it still holds into those that
        still stand (it goes on with them) and those that were lost."""
        self._check_platform(principal, offer.platform)
        now = self._now()
        resumed, lost = [], []
        with self._store.unit() as session:
            executor = ExecutorRow(
                id=ids.new_id("exe"), org=principal.org, key_id=principal.key_id, machine=offer.machine,
                platform=offer.platform, offer=offer.to_json(), connected=True, create_time=now, last_seen=now,
            )  # fmt: skip
            session.add(executor)
            for task_id, token in leases:
                task = (
                    session.get(TaskRow, task_id, with_for_update=True)
                    if ids.is_id(task_id, "tsk")
                    else None
                )
                if (
                    task is not None
                    and self._may_act(principal, task)
                    and self._holds(task, token, now)
                ):
                    task.executor_id, task.lease_expires = executor.id, now + self.ttl
                    resumed.append(task_id)
                else:
                    lost.append(task_id)
            return executor.id, resumed, lost

    def goodbye(self, executor_id: str) -> None:
        with self._store.unit() as session:
            row = session.get(ExecutorRow, executor_id)
            if row is not None:
                row.connected, row.last_seen = False, self._now()

    def _check_platform(self, principal: Principal, platform: bool) -> None:
        if platform and not principal.is_platform:
            raise errors.PermissionDenied("Only the platform credential claims as the platform.")

    @staticmethod
    def _may_act(principal: Principal, task: TaskRow) -> bool:
        """An org's executor acts on its org's tasks; the platform on the tasks no machine
        was named for, in whichever org."""
        return task.org == principal.org or (principal.is_platform and task.machine == "")

    @staticmethod
    def _holds(task: TaskRow, token: str, now: dt.datetime) -> bool:
        return (
            task.status == TaskStatus.LEASED
            and bool(token)
            and secrets.compare_digest(task.lease_sha256, lease_sha256(token))
            and task.lease_expires is not None
            and task.lease_expires > now
        )

    def _retry(self, work: Callable[[], T]) -> T:
        # Reports, claims and the sweep contend for the same task rows most of all.
        return retrying(work, attempts=8)

    # -- claims --------------------------------------------------------------------------

    def claim(
        self, principal: Principal, offer: Offer, executor_id: str = ""
    ) -> claim_service_pb2.ClaimTaskResponse | None:
        """Lease the oldest open task this executor may run, or None."""
        self._check_platform(principal, offer.platform)
        try:
            return self._retry(lambda: self._claim(principal, offer, executor_id))
        except errors.DomainError:
            raise
        except Exception:
            if offer.platform:
                # No trail, no claim: the transaction rolled back and the task is open again.
                log.exception("platform claim not recorded; task given back")
                raise errors.Unavailable() from None
            raise

    def _claim(
        self, principal: Principal, offer: Offer, executor_id: str
    ) -> claim_service_pb2.ClaimTaskResponse | None:
        now = self._now()
        with self._store.unit() as session:
            query = (
                sa.select(TaskRow)
                .join(JobRow, JobRow.id == TaskRow.job_id)
                .where(
                    TaskRow.status == TaskStatus.OPEN,
                    TaskRow.attempt_number == JobRow.attempt_count,
                    JobRow.status.in_(("preparing", "running")),
                )
                .order_by(TaskRow.create_time, TaskRow.position)
                .limit(32)
                .with_for_update(skip_locked=True, of=TaskRow)
            )
            if offer.platform:
                query = query.where(TaskRow.machine == "", TaskRow.role == "lead")
            else:
                query = query.where(TaskRow.org == principal.org, TaskRow.machine == offer.machine)
            for task in session.scalars(query).all():
                # Every other writer locks the job before its tasks: take it without
                # waiting, or leave the task to a later claim.
                job = session.get(JobRow, task.job_id, with_for_update={"skip_locked": True})
                if job is None:
                    continue
                device = self._fit(job, offer)
                if device is None:
                    continue
                token = "trl_" + secrets.token_urlsafe(32)
                lifecycle.lease(session, job, task)
                task.lease_sha256, task.epoch = lease_sha256(token), task.epoch + 1
                task.lease_expires, task.claim_time, task.report_time = now + self.ttl, now, now
                task.executor_id, task.device, task.cancel_sent = executor_id, device, False
                task.devices = offer.devices.count(device) if task.world_size == 1 else 1
                task.held = int(((job.spec or {}).get("resources") or {}).get("max_seconds") or 0)
                if task.role == "join":
                    lead = self._lead(session, task)
                    task.coordinator = lead.coordinator if lead else ""
                resume = ("", 0)
                if task.role == "lead":
                    attempt = lifecycle.current_attempt(session, job)
                    if attempt.resume_from_checkpoint and job.result:
                        resume = (
                            job.result.get("checkpoint_sha256", ""),
                            int(attempt.resume_step or 0),
                        )
                if offer.platform:
                    audit.record(
                        session, "training.claim.platform", org=job.org, subject=task.id, actor=principal.key_id,
                        job=job.id, machine=offer.machine, device=device, devices=task.devices,
                        held=task.held, payer="owner",
                    )  # fmt: skip
                session.flush()
                answer = self._task_proto(task, token)
                answer.resume_from, answer.resume_step = resume
                answer.snapshot = job.dataset_sha256
                return claim_service_pb2.ClaimTaskResponse(
                    org=job.org,
                    task=answer,
                    job=view.job_proto(session, job),
                )
        return None

    def _fit(self, job: JobRow, offer: Offer) -> str | None:
        """The device kind the task runs on, when the executor can run the job at all."""
        spec = job.spec or {}
        adaptation = (spec.get("adaptation") or {}).get("mode", "")
        output = (spec.get("output") or {}).get("kind", "")
        if spec.get("base_model") not in offer.bases or adaptation not in offer.adaptations:
            return None
        if output not in offer.outputs:
            return None
        terms = [t.get("kind") for t in (spec.get("objective") or {}).get("terms", [])]
        if any(t not in offer.terms for t in terms):
            return None
        base = self._catalog.get(str(spec.get("base_model")))
        allowed = (spec.get("resources") or {}).get("devices") or (
            base.devices if base else DEVICE_KINDS
        )
        return next((d for d in offer.devices if d in allowed), None)

    def _lead(self, session: Session, task: TaskRow) -> TaskRow | None:
        return session.scalar(
            sa.select(TaskRow).where(
                TaskRow.job_id == task.job_id,
                TaskRow.attempt_number == task.attempt_number,
                TaskRow.position == 0,
            )
        )

    def _task_proto(self, task: TaskRow, token: str) -> task_pb2.Task:
        return task_pb2.Task(
            id=task.id, job=task.job_id, role=task.role, lease=token, coordinator=task.coordinator,
            device=task.device, devices=task.devices, held=task.held,
            report=self._config.report_seconds, epoch=task.epoch, rank=task.position,
            world_size=task.world_size, attempt_number=task.attempt_number,
        )  # fmt: skip

    # -- reports -------------------------------------------------------------------------

    def report(
        self,
        principal: Principal,
        job_id: str,
        task_id: str,
        token: str,
        events: Sequence[task_pb2.TaskEvent],
    ) -> claim_service_pb2.ReportTaskResponse:
        """Apply a report's new events once each, in order, under the task's lease. When
        a side effect cannot be made now (the object store or ArtifactService is down),
        the report still renews the lease and is refused UNAVAILABLE: the executor sends
        it again, and the task lives as long as it keeps trying."""
        if len(events) > MAX_EVENTS:
            raise errors.ValidationError("events", f"must hold at most {MAX_EVENTS} events")
        for event in events:
            _check_event(event)
        try:
            effects = self._side_effects(principal, job_id, task_id, token, events)
        except errors.DomainError as exc:
            if exc.reason not in TRANSIENT:
                raise
            self._retry(lambda: self._renew(principal, job_id, task_id, token))
            raise errors.Unavailable() from None
        outcome = self._retry(
            lambda: self._apply(principal, job_id, task_id, token, events, effects)
        )
        if isinstance(outcome, errors.DomainError):
            raise outcome
        return outcome

    def _side_effects(
        self,
        principal: Principal,
        job_id: str,
        task_id: str,
        token: str,
        events: Sequence[task_pb2.TaskEvent],
    ) -> Effects:
        """What must reach ArtifactService before the report is applied: each new output
        read back, and a finished run's provenance. Both are idempotent, so a retried
        report repeats them harmlessly. An output that does not read back is refused for
        good; anything that may pass later raises."""
        with self._store.unit(write=False) as session:
            task = self._task(session, principal, job_id, task_id)
            if not self._holds(task, token, self._now()):
                return Effects()
            fresh = [e for e in events if e.seq > task.last_seq]
            job = session.get(JobRow, job_id)
            assert job is not None
            org, dataset, config_sha = task.org, job.dataset_sha256, job.spec_sha256
            base_model = str((job.spec or {}).get("base_model", ""))
        effects = Effects()
        needs = [e.sha256 for e in fresh if e.type == "artifact"]
        needs += [e.result.sha256 for e in fresh if e.type == "result" and e.result.sha256]
        for sha in dict.fromkeys(needs):
            if self._artifacts is None:
                raise errors.Unavailable()
            try:
                self._artifacts.confirm(org, job_id, sha)
            except errors.DomainError as exc:
                if exc.reason in TRANSIENT:
                    raise
                log.warning("job %s: an output was refused at read-back (%s)", job_id, exc.reason)
                effects.refused.add(sha)
        for event in fresh:
            sha = event.result.sha256
            if event.type == "result" and sha and sha not in effects.refused:
                assert self._artifacts is not None
                record = self._artifacts.record_provenance(
                    org,
                    provenance_pb2.ProvenanceRecord(
                        job_id=job_id, dataset_sha256=event.result.dataset_sha256 or dataset,
                        artifact_sha256=sha, base_model_id=base_model,
                        base_model_sha256=event.result.base_sha256,
                        training_config_sha256=event.result.training_config_sha256 or config_sha,
                    ),
                )  # fmt: skip
                effects.provenance[sha] = record.id
        return effects

    def _renew(self, principal: Principal, job_id: str, task_id: str, token: str) -> None:
        """Extend a held lease and nothing else: the executor is alive and trying."""
        now = self._now()
        with self._store.unit() as session:
            task = self._task(session, principal, job_id, task_id, lock=True)
            if self._holds(task, token, now):
                task.lease_expires, task.report_time = now + self.ttl, now

    def _task(
        self,
        session: Session,
        principal: Principal,
        job_id: str,
        task_id: str,
        *,
        lock: bool = False,
    ) -> TaskRow:
        task = (
            session.get(TaskRow, task_id, with_for_update=lock, populate_existing=lock)
            if ids.is_id(task_id, "tsk")
            else None
        )
        if task is None or task.job_id != job_id or not self._may_act(principal, task):
            raise errors.NotFound()
        if task.machine == "" and not principal.is_platform:
            raise errors.PermissionDenied(
                "A task the platform runs takes reports from the platform only."
            )
        return task

    def _apply(
        self,
        principal: Principal,
        job_id: str,
        task_id: str,
        token: str,
        events: Sequence[task_pb2.TaskEvent],
        effects: Effects,
    ) -> claim_service_pb2.ReportTaskResponse | errors.DomainError:
        now = self._now()
        with self._store.unit() as session:
            self._task(session, principal, job_id, task_id)
            # The job's row lock first, as every writer of its events takes it.
            job = session.get(JobRow, job_id, with_for_update=True)
            assert job is not None
            task = self._task(session, principal, job_id, task_id, lock=True)
            if job.status in TERMINAL and job.status != JobStatus.FAILED:
                # The job ended: the report records nothing and learns the status.
                return self._ack(task, job)
            if not self._holds(task, token, now) or job.status == JobStatus.FAILED:
                if (
                    task.status == TaskStatus.LEASED
                    and task.lease_expires is not None
                    and task.lease_expires <= now
                ):
                    lifecycle.lose(session, job, task)
                return _lease_lost()
            task.lease_expires, task.report_time = now + self.ttl, now
            attempt = lifecycle.current_attempt(session, job)
            metrics: list[task_pb2.TaskEvent] = []
            for event in sorted(events, key=lambda e: e.seq):
                if event.seq <= task.last_seq:
                    continue  # a replay: applied once already
                if event.type == "metric":
                    metrics.append(event)
                else:
                    if metrics:  # keep progress in order with the statuses around it
                        self._metrics(session, task, job, attempt, metrics)
                        metrics = []
                    if effects.refuses(event):
                        lifecycle.fail(session, job, attempt, "artifact_rejected")
                    else:
                        self._event(session, task, job, attempt, event, effects.provenance)
                task.last_seq = event.seq
                if job.status in TERMINAL:
                    break
            if metrics:
                self._metrics(session, task, job, attempt, metrics)
            return self._ack(task, job)

    def _ack(self, task: TaskRow, job: JobRow) -> claim_service_pb2.ReportTaskResponse:
        return claim_service_pb2.ReportTaskResponse(
            cancel=job.status in STOPPING and task.status == TaskStatus.LEASED,
            held=task.held,
            status=job.status,
            seq=task.last_seq,
        )

    def _event(
        self,
        session: Session,
        task: TaskRow,
        job: JobRow,
        attempt: AttemptRow,
        event: task_pb2.TaskEvent,
        provenance_ids: dict[str, str],
    ) -> None:
        kind = event.type
        if kind == "status":
            lifecycle.report_status(session, job, task, attempt, event.status, event.error)
        elif kind == "coordinator":
            lifecycle.coordinate(session, job, task, event.addr)
        elif kind == "log":
            if job.event_seq < MAX_JOB_EVENTS:
                lifecycle.append_event(
                    session, job, "log", attempt=attempt.attempt_number, line=event.line
                )
        elif kind == "artifact":
            lifecycle.append_event(
                session, job, "artifact", attempt=attempt.attempt_number, sha256=event.sha256
            )
        elif kind == "result":
            self._result(session, task, job, attempt, event.result, provenance_ids)

    def _metrics(
        self,
        session: Session,
        task: TaskRow,
        job: JobRow,
        attempt: AttemptRow,
        events: list[task_pb2.TaskEvent],
    ) -> None:
        """A run of metric points: one insert for the series (a point reported twice is
        kept once), an event each, and the job's progress from the newest."""
        now = self._now()
        rows = {
            (e.name, e.step): {
                "job_id": job.id, "attempt_number": attempt.attempt_number, "name": e.name,
                "step": e.step, "value": e.value, "create_time": now,
            }
            for e in events
        }  # fmt: skip
        insert = (postgresql.insert if self._store.dialect == "postgresql" else sqlite.insert)(
            MetricRow
        )
        session.execute(insert.on_conflict_do_nothing(), list(rows.values()))
        for event in events:
            if job.event_seq >= MAX_JOB_EVENTS:
                break
            lifecycle.append_event(
                session, job, "metric", attempt=attempt.attempt_number, name=event.name, step=event.step,
                value=event.value,
            )  # fmt: skip
        if task.role != "lead":
            return
        progress = dict(job.progress or {})
        planned = int(job.plan.get("planned_steps", 0))
        progress["planned_steps"] = planned
        for event in events:
            if event.step >= int(progress.get("step", 0)):
                progress["step"] = event.step
            if field := _PROGRESS_FIELDS.get(event.name):
                progress[field] = event.value
        step = int(progress.get("step", 0))
        progress["percent"] = round(100.0 * step / planned, 2) if planned else 0.0
        per_epoch = int(job.plan.get("steps_per_epoch", 0))
        progress["epoch"] = round(step / per_epoch, 3) if per_epoch else 0.0
        if job.running_time and step:
            elapsed = (now - job.running_time).total_seconds()
            progress["eta_seconds"] = round(elapsed / step * max(planned - step, 0), 1)
        job.progress = progress

    def _result(
        self,
        session: Session,
        task: TaskRow,
        job: JobRow,
        attempt: AttemptRow,
        result: task_pb2.TaskResult,
        provenance_ids: dict[str, str],
    ) -> None:
        spec = job.spec or {}
        if result.sha256:
            job.result = {
                "sha256": result.sha256,
                "kind": (spec.get("output") or {}).get("kind", ""),
                "name": (spec.get("output") or {}).get("name", ""),
                "base_sha256": result.base_sha256,
                "provenance_record_id": provenance_ids.get(result.sha256, ""),
                "step": result.served_step or result.step,
                "checkpoint_sha256": result.checkpoint_sha256,
                "checkpoint_step": result.checkpoint_step or result.step,
            }
            job.model_available = True
        if result.HasField("evaluation"):
            job.evaluation = json_format.MessageToDict(
                result.evaluation, preserving_proto_field_name=True
            )
        if result.HasField("outcome"):
            outcome = json_format.MessageToDict(result.outcome, preserving_proto_field_name=True)
            planned_downgrades = list(job.plan.get("downgrades", []))
            outcome["downgrades"] = list(
                dict.fromkeys([*planned_downgrades, *outcome.get("downgrades", [])])
            )
            job.outcome = outcome
        if result.training_seconds:
            attempt.training_seconds = result.training_seconds
        lifecycle.append_event(
            session, job, "result", attempt=attempt.attempt_number, sha256=result.sha256 or None
        )
        if job.status == JobStatus.CANCELLING:
            lifecycle.finish(session, job, attempt, JobStatus.CANCELLED)
        elif (job.evaluation or {}).get("verdict") == "rejected":
            lifecycle.finish(session, job, attempt, JobStatus.REJECTED)
        else:
            lifecycle.finish(session, job, attempt, JobStatus.SUCCEEDED)

    # -- expiry --------------------------------------------------------------------------

    def expire_leases(self) -> int:
        """End every task whose lease lapsed. Idempotent, and safe with several replicas:
        each task is taken under `FOR UPDATE SKIP LOCKED` on PostgreSQL."""

        def work() -> int:
            now = self._now()
            with self._store.unit() as session:
                lapsed = session.scalars(
                    sa.select(TaskRow)
                    .where(TaskRow.status == TaskStatus.LEASED, TaskRow.lease_expires <= now)
                    .limit(100)
                    .with_for_update(skip_locked=True)
                ).all()
                lost = 0
                for task in lapsed:
                    # Taken without waiting, as a claim does: a writer holding the job
                    # locks its tasks next, so waiting here could deadlock with it.
                    job = session.get(JobRow, task.job_id, with_for_update={"skip_locked": True})
                    if job is not None:
                        lifecycle.lose(session, job, task)
                        lost += 1
                return lost

        return self._retry(work)

    # -- cancels, releases and outputs ---------------------------------------------------

    def cancels_due(self, executor_id: str) -> list[tuple[str, str]]:
        """Tasks of this executor whose job wants them stopped, each told once."""

        def work() -> list[tuple[str, str]]:
            with self._store.unit() as session:
                due = session.execute(
                    sa.select(TaskRow, JobRow.status)
                    .join(JobRow, JobRow.id == TaskRow.job_id)
                    .where(
                        TaskRow.executor_id == executor_id,
                        TaskRow.status == TaskStatus.LEASED,
                        TaskRow.cancel_sent.is_(False),
                        JobRow.status.in_(STOPPING),
                    )
                ).all()
                for task, _ in due:
                    task.cancel_sent = True
                return [(task.id, status) for task, status in due]

        return self._retry(work)

    def release(self, principal: Principal, task_id: str, token: str) -> None:
        """An executor gives a task back unrun: it is open for another claim."""

        def work() -> None:
            with self._store.unit() as session:
                found = session.get(TaskRow, task_id) if ids.is_id(task_id, "tsk") else None
                if found is None or not self._may_act(principal, found):
                    raise _lease_lost()
                job = session.get(JobRow, found.job_id, with_for_update=True)
                task = session.get(TaskRow, task_id, with_for_update=True, populate_existing=True)
                assert job is not None and task is not None
                if not self._holds(task, token, self._now()):
                    raise _lease_lost()
                lifecycle.release(session, job, task)
                task.lease_sha256, task.executor_id = "", ""

        self._retry(work)

    def _held_task(
        self, principal: Principal, job_id: str, task_id: str, token: str
    ) -> tuple[str, set[str]]:
        """For a call an executor makes under its lease (a registration, an input read):
        the lease renewed, and the task's org and the objects it may read."""
        now = self._now()
        with self._store.unit() as session:
            task = self._task(session, principal, job_id, task_id, lock=True)
            if not self._holds(task, token, now):
                raise _lease_lost()
            task.lease_expires, task.report_time = now + self.ttl, now
            job = session.get(JobRow, job_id)
            assert job is not None
            return task.org, self._inputs(session, job)

    @staticmethod
    def _inputs(session: Session, job: JobRow) -> set[str]:
        """What a task of the job reads: its dataset snapshot and, for an attempt that
        resumes, the state it continues from."""
        found = {job.dataset_sha256}
        if lifecycle.current_attempt(session, job).resume_from_checkpoint and job.result:
            found.add(str(job.result.get("checkpoint_sha256", "")))
        return found - {""}

    def register_artifact(
        self, principal: Principal, request: claim_service_pb2.RegisterTaskArtifactRequest
    ) -> artifact_pb2.Grant:
        org, _ = self._retry(
            lambda: self._held_task(principal, request.id, request.task, request.lease)
        )
        if self._artifacts is None:
            raise errors.Unavailable()
        return self._artifacts.grant(
            org,
            artifact_service_pb2.GrantJobArtifactRequest(
                job_id=request.id, task_id=request.task, kind=request.kind, name=request.name,
                sha256=request.sha256, size=request.size, meta=dict(request.meta),
            ),
        )  # fmt: skip

    def read_input(
        self, principal: Principal, request: claim_service_pb2.ReadTaskInputRequest
    ) -> artifact_pb2.Artifact:
        org, inputs = self._retry(
            lambda: self._held_task(principal, request.id, request.task, request.lease)
        )
        if request.sha256 not in inputs:
            raise errors.NotFound()
        if self._artifacts is None:
            raise errors.Unavailable()
        return self._artifacts.describe(org, request.sha256)

    def job_of(self, task_id: str) -> str:
        with self._store.unit(write=False) as session:
            task = session.get(TaskRow, task_id) if ids.is_id(task_id, "tsk") else None
            if task is None:
                raise errors.NotFound()
            return task.job_id


def _lease_lost() -> errors.DomainError:
    return errors.DomainError(
        "The lease is not the task's current one; stop the task.",
        reason="LEASE_LOST",
        code=errors.Conflict.code,
    )


def _check_event(event: task_pb2.TaskEvent) -> None:
    if event.seq < 1:
        raise errors.ValidationError("events.seq", "must be at least 1")
    kind = event.type
    if kind == "status":
        if event.status not in (*LEAD_STATUSES, *JOIN_STATUSES):
            raise errors.ValidationError("events.status", "is not a status an executor reports")
        if event.error and not CODE.match(event.error):
            raise errors.ValidationError("events.error", "must be a short lower-case code")
    elif kind == "coordinator":
        if not ADDR.match(event.addr):
            raise errors.ValidationError("events.addr", "must be host:port")
    elif kind == "metric":
        if not re.match(r"^[a-z][a-z0-9_./-]{0,63}$", event.name) or not event.HasField("value"):
            raise errors.ValidationError("events.name", "must name a series and carry a value")
    elif kind == "log":
        raw = event.line.encode()[:MAX_LOG_BYTES]
        event.line = raw.decode(errors="ignore")
    elif kind == "artifact":
        if not re.match(r"^[0-9a-f]{64}$", event.sha256):
            raise errors.ValidationError("events.sha256", "must be a sha256")
    elif kind == "result":
        pass
    else:
        raise errors.ValidationError("events.type", "is not an event type")
