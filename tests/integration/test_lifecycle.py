"""The lifecycle's named transitions on real rows: any sequence of what the services do
(preparation, claims, reports, releases, lapsed leases, cancels, retries) leaves a job,
its attempt, its tasks and its preparation in states their tables allow, and agreeing
with each other. A transition the tables refuse rolls its transaction back."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import ClassVar

import hypothesis.strategies as st
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from services.core import errors, ids, lifecycle
from services.core.states import (
    ATTEMPT_TERMINAL,
    RETRYABLE,
    TASK_ENDED,
    TERMINAL,
    AttemptStatus,
    JobStatus,
    PreparationStatus,
    TaskStatus,
)
from services.core.store import Store, open_store, utcnow
from services.core.tables import AttemptRow, JobRow, TaskRow

REPORTS = ("accepted", "running", "evaluating", "finalizing", "failed", "stopped", "cancelled")


class Lifecycle(RuleBasedStateMachine):
    store: ClassVar[Store | None] = None

    @classmethod
    def opened(cls) -> Store:
        if cls.store is None:  # one database for every example; each makes its own job
            cls.store = open_store(f"sqlite:///{Path(tempfile.mkdtemp()) / 'lifecycle.db'}")
        return cls.store

    @initialize(machines=st.integers(min_value=1, max_value=2))
    def create(self, machines: int) -> None:
        self.job_id = ids.new_id("job")
        now = utcnow()
        with self.opened().unit() as session:
            session.add(
                JobRow(
                    id=self.job_id, org="acme", project="p", number=int(now.timestamp() * 1e6),
                    status="queued", spec={"resources": {"machines": [f"m{i}" for i in range(machines)]}},
                    plan={}, preparation={"status": "queued"}, attempt_count=1, event_seq=0,
                    create_time=now, update_time=now,
                )
            )  # fmt: skip
            session.flush()
            session.add(
                AttemptRow(
                    id=ids.new_id("att"), job_id=self.job_id, org="acme", attempt_number=1,
                    status="queued", create_time=now,
                )
            )  # fmt: skip

    def _do(self, work) -> None:  # type: ignore[no-untyped-def]
        """One transition in its own unit of work; a refusal rolls it back."""
        try:
            with self.opened().unit() as session:
                job = session.get(JobRow, self.job_id)
                assert job is not None
                work(session, job)
        except errors.InvalidTransition:
            pass

    @staticmethod
    def _task(session, job: JobRow, position: int) -> TaskRow | None:  # type: ignore[no-untyped-def]
        return session.scalar(
            sa.select(TaskRow).where(
                TaskRow.job_id == job.id,
                TaskRow.attempt_number == job.attempt_count,
                TaskRow.position == position,
            )
        )

    @rule(outcome=st.sampled_from(("verified", "verified", "failed", "stalled")))
    def prepare(self, outcome: str) -> None:
        """The preparer takes the job (a queued one, or a stalled one again) and its
        snapshot is verified, fails, or stalls (its preparer died)."""

        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            if job.status != JobStatus.QUEUED and not (
                job.status == JobStatus.PREPARING and not job.dataset_sha256
            ):
                return
            if lifecycle.start_preparation(session, job) or outcome == "stalled":
                return
            if outcome == "verified":
                lifecycle.snapshot_verified(session, job, "a" * 64, 10)
            else:
                lifecycle.preparation_failed(session, job, "dataset_unusable")

        self._do(work)

    @rule(position=st.integers(min_value=0, max_value=1))
    def claim(self, position: int) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            task = self._task(session, job, position)
            if task is not None and task.status == TaskStatus.OPEN and job.status in (
                JobStatus.PREPARING, JobStatus.RUNNING,
            ):  # fmt: skip
                lifecycle.lease(session, job, task)

        self._do(work)

    @rule(position=st.integers(min_value=0, max_value=1), addr=st.just("h:1"))
    def coordinate(self, position: int, addr: str) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            task = self._task(session, job, position)
            if task is not None and task.role == "lead" and task.status == TaskStatus.LEASED:
                lifecycle.coordinate(session, job, task, addr)

        self._do(work)

    @rule(position=st.integers(min_value=0, max_value=1), status=st.sampled_from(REPORTS))
    def report(self, position: int, status: str) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            task = self._task(session, job, position)
            if task is None or task.status != TaskStatus.LEASED or job.status in TERMINAL:
                return  # ClaimService applies only reports under a held lease
            wanted = "done" if task.role == "join" and status == "accepted" else status
            lifecycle.report_status(
                session, job, task, lifecycle.current_attempt(session, job), wanted, ""
            )

        self._do(work)

    @rule()
    def result(self) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            task = self._task(session, job, 0)
            if task is None or task.status != TaskStatus.LEASED or job.status in TERMINAL:
                return
            ended = (
                JobStatus.CANCELLED if job.status == JobStatus.CANCELLING else JobStatus.SUCCEEDED
            )
            lifecycle.finish(session, job, lifecycle.current_attempt(session, job), ended)

        self._do(work)

    @rule(position=st.integers(min_value=0, max_value=1))
    def release(self, position: int) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            task = self._task(session, job, position)
            if task is not None and task.status == TaskStatus.LEASED:
                lifecycle.release(session, job, task)

        self._do(work)

    @rule(position=st.integers(min_value=0, max_value=1))
    def lapse(self, position: int) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            task = self._task(session, job, position)
            if task is not None and task.status == TaskStatus.LEASED:
                lifecycle.lose(session, job, task)

        self._do(work)

    @rule()
    def cancel(self) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            try:
                lifecycle.cancel(session, job)
            except errors.DomainError as exc:
                assert exc.reason in ("JOB_FINALIZING", "INVALID_TRANSITION")
                assert job.status in TERMINAL | {JobStatus.FINALIZING}

        self._do(work)

    @rule()
    def retry(self) -> None:
        def work(session, job: JobRow) -> None:  # type: ignore[no-untyped-def]
            if job.status not in RETRYABLE:
                return
            attempt = AttemptRow(
                id=ids.new_id("att"), job_id=job.id, org=job.org, attempt_number=job.attempt_count + 1,
                status="queued", create_time=utcnow(),
            )  # fmt: skip
            session.add(attempt)
            session.flush()
            lifecycle.requeue(session, job, attempt)

        self._do(work)

    @invariant()
    def states_agree(self) -> None:
        if not hasattr(self, "job_id"):
            return
        with self.opened().unit(write=False) as session:
            job = session.get(JobRow, self.job_id)
            assert job is not None
            attempt = lifecycle.current_attempt(session, job)
            tasks = session.scalars(
                sa.select(TaskRow).where(
                    TaskRow.job_id == job.id, TaskRow.attempt_number == job.attempt_count
                )
            ).all()
            preparation = (job.preparation or {}).get("status")
            assert job.status in set(JobStatus) and attempt.status in set(AttemptStatus)
            assert preparation in set(PreparationStatus)
            assert all(task.status in set(TaskStatus) for task in tasks)
            if job.status in TERMINAL:
                assert attempt.status in ATTEMPT_TERMINAL
                assert all(task.status in TASK_ENDED for task in tasks)
            else:
                assert attempt.status not in ATTEMPT_TERMINAL
            if job.status == JobStatus.QUEUED:
                assert attempt.status == AttemptStatus.QUEUED
            if tasks and job.status not in TERMINAL:
                assert preparation == PreparationStatus.VERIFIED
            leased = [t for t in tasks if t.status == TaskStatus.LEASED and t.role == "lead"]
            if attempt.status == AttemptStatus.LEASED:
                assert leased  # a leased attempt has its lead held
            if job.status == JobStatus.RUNNING:
                assert attempt.status in (AttemptStatus.STARTED, AttemptStatus.FINALIZING)


Lifecycle.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
TestLifecycle = Lifecycle.TestCase
