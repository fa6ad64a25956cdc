"""The books balance whatever happens: a Hypothesis machine of jobs created, claimed,
reported on (and the same report replayed), lapsed, cancelled, failed, retried, crashed in
the middle of a report, and wallets credited, on real rows. After every step each
transaction's postings sum to zero, each wallet is the sum of its account's postings and
equals its credits less what its holds were charged, each hold was charged exactly its
metered seconds at its rate and never used more than it held, and only a leased task
holds anything. Every rule checks what it did: a report is refused LEASE_LOST exactly
when its lease does not hold, an end ends the job, a cancel is made or refused with its
stable reason, a sweep leaves no lapsed lease, a retry prepares the job again; and a hold
whose attempt never started training was never metered a second."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from services.claims.fencing import holds
from services.claims.leases import Leases
from services.claims.reports import Reports
from services.core import errors, ids, lifecycle
from services.core.config import Config
from services.core.money import rates
from services.core.money.tables import EntryRow, HoldRow, WalletRow
from services.core.states import RETRYABLE, TERMINAL, HoldStatus, JobStatus, TaskStatus
from services.core.store import open_store
from services.core.tables import AttemptRow, JobRow, TaskRow
from tests.integration.test_money import RUNNING, Bench, Clock, books_balance
from trainyard.claim.v1 import task_pb2

ORGS = ("acme", "globex")


class Books(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # A database of its own per example: a platform claim takes any org's oldest task,
        # so what earlier examples left would change what this one draws.
        self.home = tempfile.TemporaryDirectory()
        store = open_store(f"sqlite:///{Path(self.home.name) / 'books.db'}")
        clock = Clock()
        config = Config(home=Path(self.home.name), database_url="", free_credit_cents=0)
        leases = Leases(store, config, clock=clock)
        self.bench = Bench(store, clock, leases, Reports(store, leases, clock=clock))
        self.orgs = list(ORGS)
        self.jobs: list[str] = []
        self.answers: list[Any] = []

    @rule(org=st.sampled_from(range(2)), cents=st.integers(1, 40), name=st.integers(0, 3))
    def credit(self, org: int, cents: int, name: int) -> None:
        self.bench.credit(cents, org=self.orgs[org], name=f"c{name}")  # a name twice is once

    @rule(
        org=st.sampled_from(range(2)),
        budget=st.integers(1, 30),
        max_seconds=st.none() | st.integers(30, 3000),
    )
    def create(self, org: int, budget: int, max_seconds: int | None) -> None:
        bounds = {"budget": budget} | ({"max_seconds": max_seconds} if max_seconds else {})
        self.jobs.append(self.bench.job(self.orgs[org], **bounds))

    @rule(devices=st.integers(1, 4), run=st.booleans())
    def claim(self, devices: int, run: bool) -> None:
        """A claim whose trainer says `running` at once, or one still loading (metered
        from a later `running`, or never)."""
        if (answer := self.bench.claim(devices, run=run)) is not None:
            self.answers.append(answer)

    @precondition(lambda self: self.answers)
    @rule(pick=st.integers(0, 50))
    def start(self, pick: int) -> None:
        self._report(self.answers[pick % len(self.answers)], [RUNNING])

    @precondition(lambda self: self.answers)
    @rule(pick=st.integers(0, 50), seconds=st.integers(0, 400), replay=st.booleans())
    def report(self, pick: int, seconds: int, replay: bool) -> None:
        answer = self.answers[pick % len(self.answers)]
        self.bench.clock.advance(seconds)
        for _ in range(2 if replay else 1):
            self._report(answer)

    @precondition(lambda self: self.answers)
    @rule(pick=st.integers(0, 50), status=st.sampled_from(["failed", "cancelled", "stopped"]))
    def end(self, pick: int, status: str) -> None:
        answer = self.answers[pick % len(self.answers)]
        if status == "cancelled" and self._status(answer.task.job) == JobStatus.RUNNING:
            status = "failed"  # a trainer ends a running job cancelled only when asked to
        self.bench.clock.advance(5)
        if self._report(answer, [task_pb2.TaskEvent(type="status", status=status)]):
            assert self._status(answer.task.job) in TERMINAL

    @precondition(lambda self: self.answers)
    @rule(pick=st.integers(0, 50))
    def crash_mid_report(self, pick: int) -> None:
        """A report's transaction dies before it commits: nothing of it is kept."""
        answer = self.answers[pick % len(self.answers)]
        self.bench.clock.advance(30)

        class Crash(Exception):
            pass

        original = self.bench.store.unit

        def crashing(**kw: Any) -> Any:
            unit = original(**kw)

            class Dying:
                def __enter__(self) -> Any:
                    self.session = unit.__enter__()
                    return self.session

                def __exit__(self, *exc: Any) -> Any:
                    if exc[0] is None and kw.get("write", True):
                        self.session.flush()
                        unit.__exit__(Crash, Crash(), None)
                        raise Crash
                    return unit.__exit__(*exc)

            return Dying()

        self.bench.store.unit = crashing  # type: ignore[method-assign]
        try:
            self.bench.report(answer)
        except (Crash, errors.DomainError):
            pass
        finally:
            self.bench.store.unit = original  # type: ignore[method-assign]

    @rule(seconds=st.integers(0, 900))
    def lapse(self, seconds: int) -> None:
        self.bench.clock.advance(seconds)
        self.bench.leases.expire()
        with self.bench.store.unit(write=False) as session:
            lapsed = session.scalars(
                sa.select(TaskRow).where(
                    TaskRow.status == TaskStatus.LEASED,
                    TaskRow.lease_expires <= self.bench.clock(),
                )
            ).all()
            assert lapsed == []

    @precondition(lambda self: self.jobs)
    @rule(pick=st.integers(0, 50))
    def cancel(self, pick: int) -> None:
        job_id = self.jobs[pick % len(self.jobs)]
        try:
            with self.bench.store.unit() as session:
                job = session.get(JobRow, job_id)
                assert job is not None
                lifecycle.cancel(session, job)
        except errors.DomainError as exc:
            assert exc.reason in ("TRAINING_JOB_FINALIZING", "INVALID_TRANSITION")
            assert self._status(job_id) in TERMINAL | {JobStatus.FINALIZING}
        else:
            assert self._status(job_id) in (JobStatus.CANCELLING, JobStatus.CANCELLED)

    @precondition(lambda self: self.jobs)
    @rule(pick=st.integers(0, 50))
    def retry(self, pick: int) -> None:
        job_id = self.jobs[pick % len(self.jobs)]
        with self.bench.store.unit() as session:
            job = session.get(JobRow, job_id)
            assert job is not None
            if job.status not in RETRYABLE:
                return
            attempt = AttemptRow(
                id=ids.new_id("att"), job_id=job.id, org=job.org,
                attempt_number=job.attempt_count + 1, status="queued", create_time=self.bench.clock(),
            )  # fmt: skip
            session.add(attempt)
            session.flush()
            lifecycle.requeue(session, job, attempt)
            lifecycle.start_preparation(session, job)
        assert self._status(job_id) == JobStatus.PREPARING

    def _status(self, job_id: str) -> str:
        with self.bench.store.unit(write=False) as session:
            job = session.get(JobRow, job_id)
            assert job is not None
            return job.status

    def _report(self, answer: Any, events: Any = ()) -> bool:
        """Report under the answer's lease: refused LEASE_LOST exactly when the job has
        not ended (or failed) and the lease does not hold. Whether it was applied."""
        with self.bench.store.unit(write=False) as session:
            job = session.get(JobRow, answer.task.job)
            task = session.get(TaskRow, answer.task.id)
            assert job is not None and task is not None
            ended = job.status in TERMINAL and job.status != JobStatus.FAILED
            held = holds(task, answer.task.lease, self.bench.clock())
            refused = not ended and (not held or job.status == JobStatus.FAILED)
        try:
            self.bench.report(answer, events)
        except errors.DomainError as exc:
            assert exc.reason == "LEASE_LOST" and refused, exc.reason
            return False
        assert not refused, "a report under a lease that does not hold was applied"
        return True

    @staticmethod
    def _started(session: Any, task_id: str) -> bool:
        """Whether the attempt of a task's hold started training."""
        task = session.get(TaskRow, task_id)
        return (
            task is not None
            and session.scalar(
                sa.select(AttemptRow.started_time).where(
                    AttemptRow.job_id == task.job_id,
                    AttemptRow.attempt_number == task.attempt_number,
                )
            )
            is not None
        )

    def teardown(self) -> None:
        self.bench.store.dispose()
        self.home.cleanup()

    @invariant()
    def the_books_balance(self) -> None:
        books_balance(self.bench.store)
        with self.bench.store.unit(write=False) as session:
            for org in self.orgs:
                wallet = session.get(WalletRow, org)
                credits = session.scalar(
                    sa.select(sa.func.coalesce(sa.func.sum(EntryRow.micro_cents), 0)).where(
                        EntryRow.org == org, EntryRow.kind == "credit"
                    )
                )
                holds = list(session.scalars(sa.select(HoldRow).where(HoldRow.org == org)))
                charged = sum(h.charged_micro_cents for h in holds)
                assert (wallet.balance if wallet else 0) == credits - charged
                for hold in holds:
                    assert hold.charged_micro_cents == rates.cost(hold.used_seconds, hold.rate)
                    assert 0 <= hold.used_seconds <= hold.held_seconds
                    if not self._started(session, hold.task_id):
                        assert hold.used_seconds == 0  # nothing ran, nothing is charged
                    if hold.status == HoldStatus.LIVE:
                        task = session.get(TaskRow, hold.task_id)
                        assert task is not None and task.status == TaskStatus.LEASED
                        assert task.epoch == hold.epoch


Books.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_books_balance_whatever_happens = Books.TestCase
