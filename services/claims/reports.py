"""Report ingestion: an executor's events for a task, parsed once into typed events, their
side effects made through ArtifactService (each output read back, a finished run's
provenance), then applied once each, in order, under the task's lease: statuses and
coordinators through the lifecycle, metrics as series and progress, the result on the job.

A report under any lease but the task's current, unlapsed one is LEASE_LOST and changes
nothing."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session

from services.claims import store
from services.claims.applying import Effects, apply_event
from services.claims.fencing import MAX_HELD, acting_on, holds, lease_lost
from services.claims.leases import Leases
from services.core import bulk, errors, lifecycle, trace
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.metrics import ClaimMetrics
from services.core.money import windows
from services.core.states import STOPPING, TERMINAL, JobStatus, TaskStatus
from services.core.store import Store, utcnow
from services.core.tables import AttemptRow, JobRow, TaskRow
from trainyard.artifact.v1 import provenance_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.training.events import (
    MAX_EVENTS,
    Artifact,
    Event,
    InvalidEvent,
    Metric,
    Result,
    parse_report,
)

log = logging.getLogger(__name__)

# The most log and metric events a job keeps (HIP-1333 §12): past it, a log line or a
# metric point is dropped, from the events and the series alike, while statuses,
# artifacts and the result are always kept and the job's progress still moves.
MAX_JOB_EVENTS = 100_000
# The series whose newest point the job's progress shows.
_PROGRESS_FIELDS = {
    "loss": "loss",
    "eval_loss": "eval_loss",
    "learning_rate": "learning_rate",
    "tokens_per_second": "tokens_per_second",
    "samples_per_second": "samples_per_second",
    "model_tflops": "model_tflops",
    "mfu": "mfu",
    "flops_per_token": "flops_per_token",
    "peak_tflops": "peak_tflops",
}
# The series whose every point the metrics observe, by the ClaimMetrics histogram's name.
_OBSERVED = frozenset({"tokens_per_second", "mfu"})
# Refusals of another service that a later try may not meet.
TRANSIENT = frozenset({"UNAVAILABLE", "CONFLICT"})


def parse_events(events: Sequence[task_pb2.TaskEvent]) -> list[Event]:
    """A report's events, typed; a field violation for the first that is not valid. Either
    every event is numbered or none is (`parse_report`)."""
    if len(events) > MAX_EVENTS:
        raise errors.ValidationError("events", f"must hold at most {MAX_EVENTS} events")
    try:
        return parse_report(events)
    except InvalidEvent as exc:
        supported = {"supported": ",".join(exc.supported)} if exc.supported else None
        raise errors.ValidationError(exc.field, exc.message, metadata=supported) from None


def numbered(events: list[Event], last_seq: int) -> list[Event]:
    """The events in the order they apply, each with its number: a report that numbers
    none of its events (HIP-1333 §5) is numbered in arrival order after the task's highest
    applied number — under the task's lock, so two such reports never share a number."""
    if events and events[0].seq == 0:
        return [dataclasses.replace(e, seq=last_seq + n) for n, e in enumerate(events, 1)]
    return sorted(events, key=lambda e: e.seq)


class Reports:
    def __init__(
        self,
        db: Store,
        leases: Leases,
        artifacts: ArtifactClient | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
        metrics: ClaimMetrics | None = None,
        max_events: int = MAX_JOB_EVENTS,
    ) -> None:
        self._db = db
        self._leases = leases
        self._artifacts = artifacts
        self._now = clock
        self._counted = metrics or ClaimMetrics(CollectorRegistry())
        self._max_events = max_events

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
        trace.hop("report.applying", task=task_id)
        typed = parse_events(events)
        trace.hop("report.parsed", task=task_id)
        return self._report(principal, job_id, task_id, token, typed)

    def report_together(
        self,
        principal: Principal,
        job_id: str,
        task_id: str,
        token: str,
        reports: Sequence[Sequence[task_pb2.TaskEvent]],
    ) -> list[claim_service_pb2.ReportTaskResponse | errors.DomainError]:
        """Apply reports of one task under one lease that came while another was applied,
        each answered as `report` would answer it: one that is not valid is refused alone,
        and the others' events are applied in one transaction (one commit for them all;
        each answer says what it applied). Reports that carry outputs or number none of
        their events are applied one by one, as each needs."""
        trace.hop("report.applying", task=task_id)
        answers: dict[int, claim_service_pb2.ReportTaskResponse | errors.DomainError] = {}
        valid: list[tuple[int, list[Event]]] = []
        for at, report in enumerate(reports):
            try:
                valid.append((at, parse_events(report)))
            except errors.DomainError as exc:
                answers[at] = exc
        trace.hop("report.parsed", task=task_id)
        alone = any(
            not typed or typed[0].seq == 0 or any(isinstance(e, (Artifact, Result)) for e in typed)
            for _, typed in valid
        )
        for at, typed in valid if alone else ():
            try:
                answers[at] = self._report(principal, job_id, task_id, token, typed)
            except errors.DomainError as exc:
                answers[at] = exc
        if not alone and valid:
            # As one by one: an event numbered below one an earlier report applied is a
            # replay, left out here as it would be there.
            events: list[Event] = []
            for _, typed in valid:
                above = events[-1].seq if events else 0
                events.extend(sorted((e for e in typed if e.seq > above), key=lambda e: e.seq))
            applied: list[Event] = []
            outcome = store.retry(
                lambda: self._apply(principal, job_id, task_id, token, events, Effects(), applied)
            )
            trace.hop("report.committed", task=task_id)
            self._count(applied)
            for at, _ in valid:
                answers[at] = outcome
        return [answers[at] for at in range(len(reports))]

    def _report(
        self, principal: Principal, job_id: str, task_id: str, token: str, typed: list[Event]
    ) -> claim_service_pb2.ReportTaskResponse:
        try:
            effects = self._side_effects(principal, job_id, task_id, token, typed)
        except errors.DomainError as exc:
            if exc.reason not in TRANSIENT:
                raise
            store.retry(lambda: self._leases.renew(principal, job_id, task_id, token))
            raise errors.Unavailable() from None
        applied: list[Event] = []
        outcome = store.retry(
            lambda: self._apply(principal, job_id, task_id, token, typed, effects, applied)
        )
        trace.hop("report.committed", task=task_id)
        if isinstance(outcome, errors.DomainError):
            raise outcome
        self._count(applied)
        return outcome

    def _count(self, applied: list[Event]) -> None:
        """Count what a commit applied (a try that lost a race cleared what it noted)."""
        for kind, count in collections.Counter(event.type for event in applied).items():
            self._counted.events.labels(kind).inc(count)
        for event in applied:
            if isinstance(event, Metric) and event.name in _OBSERVED:
                getattr(self._counted, event.name).observe(event.value)

    # -- side effects ----------------------------------------------------------------------

    def _side_effects(
        self, principal: Principal, job_id: str, task_id: str, token: str, events: list[Event]
    ) -> Effects:
        """What must reach ArtifactService before the report is applied: each new output
        read back, and a finished run's provenance. Both are idempotent, so a retried
        report repeats them harmlessly. An output that does not read back is refused for
        good; anything that may pass later raises."""
        if not any(isinstance(e, (Artifact, Result)) for e in events):
            return Effects()  # metrics, logs, statuses: nothing to make first
        with self._db.unit(write=False) as session:
            task = acting_on(session, principal, job_id, task_id)
            if not holds(task, token, self._now()):
                return Effects()
            fresh = [e for e in events if e.seq == 0 or e.seq > task.last_seq]
            job = store.job(session, job_id)
            assert job is not None
            org, dataset, config_sha = task.org, job.dataset_sha256, job.spec_sha256
            base_model = job.frozen().base_model
        effects = Effects()
        needs = [e.sha256 for e in fresh if isinstance(e, Artifact)]
        needs += [e.sha256 for e in fresh if isinstance(e, Result) and e.sha256]
        for sha in dict.fromkeys(needs):
            if self._artifacts is None:
                raise errors.Unavailable()
            try:
                effects.sizes[sha] = int(self._artifacts.confirm(org, job_id, sha).size)
            except errors.DomainError as exc:
                if exc.reason in TRANSIENT:
                    raise
                log.warning("job %s: an output was refused at read-back (%s)", job_id, exc.reason)
                effects.refused.add(sha)
        for event in fresh:
            if isinstance(event, Result) and event.sha256 and event.sha256 not in effects.refused:
                assert self._artifacts is not None
                record = self._artifacts.record_provenance(
                    org,
                    provenance_pb2.ProvenanceRecord(
                        job_id=job_id,
                        dataset_sha256=event.dataset_sha256 or dataset,
                        artifact_sha256=event.sha256,
                        base_model_id=base_model,
                        base_model_sha256=event.base_sha256,
                        training_config_sha256=event.training_config_sha256 or config_sha,
                    ),
                )
                effects.provenance[event.sha256] = record.id
        return effects

    # -- applying --------------------------------------------------------------------------

    def _apply(
        self,
        principal: Principal,
        job_id: str,
        task_id: str,
        token: str,
        events: list[Event],
        effects: Effects,
        applied: list[Event],
    ) -> claim_service_pb2.ReportTaskResponse | errors.DomainError:
        """Apply the events under the lease; each applied goes in `applied`."""
        applied.clear()
        now = self._now()
        with self._db.unit() as session:
            acting_on(session, principal, job_id, task_id)
            # The job's row lock first, as every writer of its events takes it.
            job = store.job(session, job_id, lock=True)
            assert job is not None
            task = acting_on(session, principal, job_id, task_id, lock=True)
            if job.status in TERMINAL and job.status != JobStatus.FAILED:
                # The job ended: the report records nothing and learns the status.
                return _ack(task, job)
            if not holds(task, token, now) or job.status == JobStatus.FAILED:
                if (
                    task.status == TaskStatus.LEASED
                    and task.lease_expires is not None
                    and task.lease_expires <= now
                ):
                    lifecycle.lose(session, job, task)
                return lease_lost()
            task.lease_expires, task.report_time = now + self._leases.ttl, now
            attempt = lifecycle.current_attempt(session, job)
            # Meter by the clock since training started and charge what that adds, before
            # the events, which may end the job and release what it holds (§10).
            hold = windows.hold_of(session, task.id, task.epoch)
            started = attempt.started_time is not None
            stop = ""
            if hold is not None:
                stop = windows.meter(
                    session,
                    self._leases.policy,
                    hold,
                    job.frozen().resources,
                    now,
                    started,
                    key_id=job.key_id,
                )
                task.held = min(hold.held_seconds, MAX_HELD)
            metrics: list[Metric] = []
            # The highest number applied, kept on the task row once a run of metrics ends
            # (an attribute of a mapped row costs a little each time it is set).
            last = task.last_seq
            for event in numbered(events, last):
                if event.seq <= last:
                    continue  # a replay: applied once already
                if isinstance(event, Metric):
                    metrics.append(event)
                else:
                    if metrics:  # keep progress in order with the statuses around it
                        self._metrics(session, task, job, attempt, metrics)
                        metrics = []
                    task.last_seq = last
                    if effects.refuses(event):
                        lifecycle.fail(session, job, attempt, "artifact_rejected")
                    else:
                        apply_event(session, task, job, attempt, event, effects, self._max_events)
                last = event.seq
                applied.append(event)
                if job.status in TERMINAL:
                    break
            task.last_seq = last
            if metrics:
                self._metrics(session, task, job, attempt, metrics)
            if not started and attempt.started_time is not None:
                windows.start_metering(session, job.id, now)  # this report's `running`
            if stop and job.status not in TERMINAL:
                lifecycle.fail(session, job, attempt, stop, job_status=JobStatus.STOPPED)
            return _ack(task, job)

    def _metrics(
        self,
        session: Session,
        task: TaskRow,
        job: JobRow,
        attempt: AttemptRow,
        points: list[Metric],
    ) -> None:
        """A run of metric points: in the series (a point reported twice is kept once) and
        an event each, for the points within the job's cap of events, and the job's
        progress from the newest of them all."""
        now = self._now()
        lifecycle.append_metrics(
            session,
            job,
            points[: max(self._max_events - job.event_seq, 0)],
            attempt=attempt.attempt_number,
            now=now,
        )
        if task.role != "lead":
            return
        progress = dict(job.progress or {})
        plan = job.planned()
        planned = plan.planned_steps
        progress["planned_steps"] = planned
        for point in points:
            if point.step >= int(progress.get("step", 0)):
                progress["step"] = point.step
            if field := _PROGRESS_FIELDS.get(point.name):
                progress[field] = bulk.json_double(point.value)  # a NaN loss reads "NaN"
        step = int(progress.get("step", 0))
        progress["percent"] = round(100.0 * step / planned, 2) if planned else 0.0
        per_epoch = plan.steps_per_epoch
        progress["epoch"] = round(step / per_epoch, 3) if per_epoch else 0.0
        if job.running_time and step:
            elapsed = (now - job.running_time).total_seconds()
            progress["eta_seconds"] = round(elapsed / step * max(planned - step, 0), 1)
        job.progress = progress


def _ack(task: TaskRow, job: JobRow) -> claim_service_pb2.ReportTaskResponse:
    return claim_service_pb2.ReportTaskResponse(
        # A stopped job's tasks end with it, and their trainers must still be killed.
        cancel=job.status == JobStatus.STOPPED
        or (job.status in STOPPING and task.status == TaskStatus.LEASED),
        held=task.held,
        status=job.status,
        seq=task.last_seq,
    )
