"""The lifecycle's named transitions on real rows: any sequence of what the services do
(preparation, claims, reports, releases, lapsed leases, cancels, retries; a training
client placed, called, answered and ended; an object stored; holds released) leaves every
row in states their tables allow, agreeing with each other. Each rule predicts from the
tables whether its transition is allowed: an allowed one must happen, a refused one must
raise INVALID_TRANSITION (or the cancel's stable refusal) and roll its transaction back."""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import hypothesis.strategies as st
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sqlalchemy.orm import Session

from services.core import errors, ids, lifecycle
from services.core.money.tables import HoldRow
from services.core.object_tables import ObjectRow
from services.core.states import (
    ATTEMPT_MOVES,
    ATTEMPT_TERMINAL,
    CLIENT_LIVE,
    CLIENT_MOVES,
    JOB_MOVES,
    OBJECT_MOVES,
    OPERATION_MOVES,
    OPERATION_PENDING,
    PREPARATION_MOVES,
    RETRYABLE,
    TASK_ENDED,
    TASK_MOVES,
    TERMINAL,
    AttemptStatus,
    CancelPlan,
    ClientStatus,
    HoldStatus,
    JobStatus,
    ObjectStatus,
    OperationStatus,
    PreparationStatus,
    TaskStatus,
    cancel_plan,
)
from services.core.store import Store, open_store, utcnow
from services.core.tables import AttemptRow, ClientRow, JobRow, OperationRow, TaskRow

J, A, T, P = JobStatus, AttemptStatus, TaskStatus, PreparationStatus
REPORTS = ("accepted", "running", "evaluating", "finalizing", "failed", "stopped", "cancelled")
# Which table moves each part of a job's state: "job", "attempt", "prep", or a task's position.
TABLES: Mapping[str, Mapping[str, frozenset[str]]] = {
    "job": JOB_MOVES,
    "attempt": ATTEMPT_MOVES,
    "prep": PREPARATION_MOVES,
}
Key = str | int
Steps = list[tuple[Key, str]]
Snapshot = dict[Key, str]


def allowed(moves: Mapping[str, frozenset[str]], current: str, target: str) -> bool:
    return current == target or target in moves[current]


def predict(before: Snapshot, steps: Steps) -> Snapshot | None:
    """The states the steps leave, one after another as the tables allow; None when the
    tables refuse one of them."""
    state = dict(before)
    for key, target in steps:
        moves = TASK_MOVES if isinstance(key, int) else TABLES[key]
        if not allowed(moves, state[key], target):
            return None
        state[key] = target
    return state


def finish_steps(before: Snapshot, status: str) -> Steps:
    """What `lifecycle.finish` moves."""
    steps: Steps = []
    if before["job"] in (J.RUNNING, J.EVALUATING) and status in (J.SUCCEEDED, J.REJECTED):
        steps.append(("job", J.FINALIZING))
    if before["attempt"] in (A.LEASED, A.ACCEPTED) and status != J.CANCELLED:
        steps.append(("attempt", A.STARTED))
    steps.append(("attempt", A.CANCELLED if status == J.CANCELLED else A.SUCCEEDED))
    steps.append(("job", status))
    return steps + ended_tasks(before, T.DONE)


def fail_steps(before: Snapshot, status: str = J.FAILED) -> Steps:
    """What `lifecycle.fail` moves."""
    steps: Steps = [("attempt", A.FAILED)]
    if before["job"] == J.CANCELLING:
        steps.append(("job", J.CANCELLED))
    elif before["job"] not in TERMINAL:
        steps.append(("job", status))
    return steps + ended_tasks(before, T.FAILED)


def ended_tasks(before: Snapshot, target: str) -> Steps:
    return [
        (key, target)
        for key, status in before.items()
        if isinstance(key, int) and status not in TASK_ENDED
    ]


class Lifecycle(RuleBasedStateMachine):
    store: ClassVar[Store | None] = None

    @classmethod
    def opened(cls) -> Store:
        if cls.store is None:  # one database for every example; each makes its own rows
            cls.store = open_store(f"sqlite:///{Path(tempfile.mkdtemp()) / 'lifecycle.db'}")
        return cls.store

    @initialize(machines=st.integers(min_value=1, max_value=2))
    def create(self, machines: int) -> None:
        self.job_id, self.client_id = ids.new_id("job"), ids.new_id("cli")
        self.sha256 = ids.new_id("obj").encode().hex().ljust(64, "0")[:64]
        now = utcnow()
        with self.opened().unit() as session:
            session.add(
                JobRow(
                    id=self.job_id,
                    org="acme",
                    project="p",
                    number=int(now.timestamp() * 1e6),
                    status=J.QUEUED,
                    spec={"resources": {"machines": [f"m{i}" for i in range(machines)]}},
                    plan={},
                    preparation={"status": P.QUEUED},
                    attempt_count=1,
                    event_seq=0,
                    create_time=now,
                    update_time=now,
                )
            )
            session.flush()
            session.add(new_attempt(self.job_id, 1))
            session.add(
                ClientRow(
                    id=self.client_id,
                    org="acme",
                    base_model="m",
                    adaptation={},
                    status=ClientStatus.PLACING,
                    executor_id="exe_0",
                    lease_expires=now,
                    create_time=now,
                    update_time=now,
                )
            )
            session.add(new_operation(self.client_id, 0, now))
            session.add(
                HoldRow(
                    task_id=self.client_id,
                    epoch=1,
                    org="acme",
                    job_id="",
                    project="",
                    charged=False,
                    meter="client",
                    rate=0,
                    devices=1,
                    held_seconds=60,
                    status=HoldStatus.LIVE,
                    start_time=now,
                    update_time=now,
                )
            )
            session.add(
                ObjectRow(
                    org="acme",
                    sha256=self.sha256,
                    id=ids.new_id("obj"),
                    size=1,
                    kind="dataset",
                    name="d",
                    status=ObjectStatus.PENDING,
                    job_id="",
                    create_time=now,
                )
            )

    # -- a job, its attempt, tasks and preparation ----------------------------------------

    def _snapshot(self) -> Snapshot:
        with self.opened().unit(write=False) as session:
            job = session.get(JobRow, self.job_id)
            assert job is not None
            state: Snapshot = {
                "job": job.status,
                "attempt": lifecycle.current_attempt(session, job).status,
                "prep": (job.preparation or {}).get("status", P.QUEUED),
            }
            for task in self._tasks(session, job):
                state[task.position] = task.status
            return state

    @staticmethod
    def _tasks(session: Session, job: JobRow) -> list[TaskRow]:
        return list(
            session.scalars(
                sa.select(TaskRow).where(
                    TaskRow.job_id == job.id, TaskRow.attempt_number == job.attempt_count
                )
            )
        )

    def _job_move(
        self, work: Callable[[Session, JobRow], None], plan: Callable[[Snapshot], Steps]
    ) -> None:
        """Run one transition in its own unit of work; it must end as `plan`'s steps
        predict from the tables, or be refused and leave every row as it was."""
        before = self._snapshot()
        expected = predict(before, plan(before))
        try:
            with self.opened().unit() as session:
                job = session.get(JobRow, self.job_id)
                assert job is not None
                work(session, job)
        except errors.InvalidTransition:
            assert expected is None, f"refused, though the tables allow it: {before}"
            assert self._snapshot() == before
            return
        assert expected is not None, f"made, though the tables refuse it: {before}"
        after = self._snapshot()
        assert {k: after.get(k) for k in expected} == expected

    def _task(self, session: Session, job: JobRow, position: int) -> TaskRow | None:
        return next((t for t in self._tasks(session, job) if t.position == position), None)

    @rule(outcome=st.sampled_from(("verified", "verified", "failed", "stalled")))
    def prepare(self, outcome: str) -> None:
        """The preparer takes the job (whatever its state: any but a queued or stalled
        one is refused) and its snapshot is verified, fails, or stalls."""

        def work(session: Session, job: JobRow) -> None:
            if lifecycle.start_preparation(session, job) or outcome == "stalled":
                return
            if outcome == "verified":
                lifecycle.snapshot_verified(session, job, "a" * 64, 10)
            else:
                lifecycle.preparation_failed(session, job, "dataset_unusable")

        def plan(before: Snapshot) -> Steps:
            if before["prep"] == P.VERIFIED:
                return [("job", J.PREPARING)]
            steps: Steps = [("job", J.PREPARING), ("prep", P.SNAPSHOTTING)]
            if outcome == "stalled":
                return steps
            if outcome == "verified":
                return [*steps, ("prep", P.VERIFIED)]
            return [*steps, ("prep", P.FAILED), ("attempt", A.FAILED), ("job", J.FAILED)]

        self._job_move(work, plan)

    @rule(position=st.integers(min_value=0, max_value=1))
    def claim(self, position: int) -> None:
        """A task is leased, whatever its state (only an open one may be)."""

        def work(session: Session, job: JobRow) -> None:
            task = self._task(session, job, position)
            if task is not None:
                lifecycle.lease(session, job, task)

        def plan(before: Snapshot) -> Steps:
            if position not in before:
                return []
            lead = [("attempt", A.LEASED)] if position == 0 else []
            return [(position, T.LEASED), *lead]

        self._job_move(work, plan)

    @rule(position=st.integers(min_value=0, max_value=1), addr=st.just("h:1"))
    def coordinate(self, position: int, addr: str) -> None:
        def work(session: Session, job: JobRow) -> None:
            task = self._task(session, job, position)
            if task is not None and task.role == "lead":
                lifecycle.coordinate(session, job, task, addr)

        def plan(before: Snapshot) -> Steps:
            if position != 0 or 0 not in before:
                return []
            return [(k, T.OPEN) for k, s in before.items() if isinstance(k, int) and s == T.WAITING]

        self._job_move(work, plan)

    @rule(position=st.integers(min_value=0, max_value=1), status=st.sampled_from(REPORTS))
    def report(self, position: int, status: str) -> None:
        """A status reported for a task ClaimService holds the lease of (it applies no
        other)."""
        wanted = "done" if position > 0 and status == "accepted" else status
        before = self._snapshot()
        if before.get(position) != T.LEASED or before["job"] in TERMINAL:
            return

        def work(session: Session, job: JobRow) -> None:
            task = self._task(session, job, position)
            assert task is not None
            attempt = lifecycle.current_attempt(session, job)
            lifecycle.report_status(session, job, task, attempt, wanted, "")

        def plan(before: Snapshot) -> Steps:
            cancelling = before["job"] == J.CANCELLING
            if position > 0:
                return [(position, T.DONE)] if wanted == "done" else fail_steps(before)
            if wanted == "accepted":
                return [("attempt", A.ACCEPTED)]
            if wanted == "running":
                return [("attempt", A.STARTED), *([] if cancelling else [("job", J.RUNNING)])]
            if wanted == "evaluating":
                return [] if cancelling else [("job", J.EVALUATING)]
            if wanted == "finalizing":
                job = [] if cancelling else [("job", J.FINALIZING)]
                return [("attempt", A.FINALIZING), *job]
            if wanted == "cancelled":
                return finish_steps(before, J.CANCELLED)
            return fail_steps(before, J.STOPPED if wanted == "stopped" else J.FAILED)

        self._job_move(work, plan)

    @rule()
    def result(self) -> None:
        """The lead's result, under its lease."""
        before = self._snapshot()
        if before.get(0) != T.LEASED or before["job"] in TERMINAL:
            return
        ended = J.CANCELLED if before["job"] == J.CANCELLING else J.SUCCEEDED

        def work(session: Session, job: JobRow) -> None:
            lifecycle.finish(session, job, lifecycle.current_attempt(session, job), ended)

        self._job_move(work, lambda before: finish_steps(before, ended))

    @rule(position=st.integers(min_value=0, max_value=1))
    def release(self, position: int) -> None:
        """A task given back, whatever its state (only a leased or open one may be)."""

        def work(session: Session, job: JobRow) -> None:
            task = self._task(session, job, position)
            if task is not None:
                lifecycle.release(session, job, task)

        def plan(before: Snapshot) -> Steps:
            if position not in before:
                return []
            requeue = position == 0 and before["attempt"] == A.LEASED
            return [(position, T.OPEN), *([("attempt", A.QUEUED)] if requeue else [])]

        self._job_move(work, plan)

    @rule(position=st.integers(min_value=0, max_value=1))
    def lapse(self, position: int) -> None:
        """A task's lease lapses, whatever its state (only a leased one's may)."""

        def work(session: Session, job: JobRow) -> None:
            task = self._task(session, job, position)
            if task is not None:
                lifecycle.lose(session, job, task)

        def plan(before: Snapshot) -> Steps:
            if position not in before:
                return []
            steps: Steps = [(position, T.EXPIRED)]
            if before["job"] in TERMINAL:
                return steps
            if before["attempt"] not in ATTEMPT_TERMINAL:
                steps.append(("attempt", A.EXPIRED))
            steps.append(("job", J.CANCELLED if before["job"] == J.CANCELLING else J.FAILED))
            ended = {**before, position: T.EXPIRED}
            return steps + ended_tasks(ended, T.FAILED)

        self._job_move(work, plan)

    @rule()
    def cancel(self) -> None:
        """A cancel: refused with TRAINING_JOB_FINALIZING or INVALID_TRANSITION exactly where
        `cancel_plan` says, else made as planned."""
        before = self._snapshot()
        held = any(isinstance(k, int) and s == T.LEASED for k, s in before.items())
        try:
            plan = cancel_plan(before["job"], held=held)
        except errors.DomainError as refusal:
            with self.opened().unit() as session:
                job = session.get(JobRow, self.job_id)
                assert job is not None
                try:
                    lifecycle.cancel(session, job)
                except errors.DomainError as exc:
                    assert exc.reason == refusal.reason
                else:
                    raise AssertionError(f"a cancel from {before['job']} was not refused")
            assert self._snapshot() == before
            return

        def steps(before: Snapshot) -> Steps:
            if plan == CancelPlan.COOPERATIVE:
                return [("job", J.CANCELLING)]
            if plan == CancelPlan.NOOP:
                return []
            prep = [("prep", P.CANCELLED)] if before["prep"] in (P.QUEUED, P.SNAPSHOTTING) else []
            return [
                ("attempt", A.CANCELLED),
                *prep,
                *ended_tasks(before, T.CANCELLED),
                ("job", J.CANCELLED),
            ]

        self._job_move(lambda session, job: lifecycle.cancel(session, job), steps)

    @rule()
    def retry(self) -> None:
        """A retry, whatever the job's state: only a failed or cancelled job starts a new
        attempt, queued, keeping a verified snapshot."""
        before = self._snapshot()
        try:
            with self.opened().unit() as session:
                job = session.get(JobRow, self.job_id)
                assert job is not None
                attempt = new_attempt(job.id, job.attempt_count + 1)
                session.add(attempt)
                session.flush()
                lifecycle.requeue(session, job, attempt)
        except errors.InvalidTransition:
            assert before["job"] not in RETRYABLE
            assert self._snapshot() == before
            return
        assert before["job"] in RETRYABLE
        prep = P.VERIFIED if before["prep"] == P.VERIFIED else P.QUEUED
        assert self._snapshot() == {"job": J.QUEUED, "attempt": A.QUEUED, "prep": prep}

    # -- a training client, its operations, its hold; an object ---------------------------

    def _client_move(
        self, work: Callable[[Session, ClientRow], object], made: Callable[[ClientRow], bool]
    ) -> bool:
        """Run one transition on the client's rows; `made` says, from the rows before,
        whether the tables allow it."""
        with self.opened().unit(write=False) as session:
            client = session.get(ClientRow, self.client_id)
            assert client is not None
            allow = made(client)
        before = self._client_rows()
        try:
            with self.opened().unit() as session:
                client = session.get(ClientRow, self.client_id)
                assert client is not None
                work(session, client)
        except errors.InvalidTransition:
            assert not allow, f"refused, though the tables allow it: {before}"
            assert self._client_rows() == before
            return False
        assert allow, f"made, though the tables refuse it: {before}"
        return True

    def _client_rows(self) -> tuple[str, list[tuple[int, str]], list[str]]:
        with self.opened().unit(write=False) as session:
            client = session.get(ClientRow, self.client_id)
            assert client is not None
            ops = session.scalars(
                sa.select(OperationRow)
                .where(OperationRow.client_id == self.client_id)
                .order_by(OperationRow.seq)
            )
            holds = session.scalars(sa.select(HoldRow).where(HoldRow.task_id == self.client_id))
            return client.status, [(op.seq, op.status) for op in ops], [h.status for h in holds]

    def _op(self, session: Session, seq: int) -> OperationRow | None:
        return session.scalar(
            sa.select(OperationRow).where(
                OperationRow.client_id == self.client_id, OperationRow.seq == seq
            )
        )

    @rule()
    def call(self) -> None:
        """A call stored on a live client (ClientService refuses one on an ended client)."""
        status, ops, _ = self._client_rows()
        if status in CLIENT_LIVE:
            with self.opened().unit() as session:
                session.add(new_operation(self.client_id, len(ops), utcnow()))

    @rule(seq=st.integers(min_value=0, max_value=3))
    def send(self, seq: int) -> None:
        def made(_: ClientRow) -> bool:
            return self._op_allows(seq, OperationStatus.SENT)

        def work(session: Session, _: ClientRow) -> None:
            if (op := self._op(session, seq)) is not None:
                lifecycle.operation_sent(op)

        if self._client_move(work, made):
            self._op_is(seq, OperationStatus.SENT)

    @rule(seq=st.integers(min_value=0, max_value=3), ok=st.booleans())
    def answer(self, seq: int, ok: bool) -> None:
        """The engine's answer to a call, whatever its state (only one not answered may
        be); an answered create makes its client ready."""
        target = OperationStatus.DONE if ok else OperationStatus.FAILED
        ready = ok and seq == 0

        def made(client: ClientRow) -> bool:
            ops = self._op_allows(seq, target)
            return ops and (not ready or allowed(CLIENT_MOVES, client.status, ClientStatus.READY))

        def work(session: Session, client: ClientRow) -> None:
            if (op := self._op(session, seq)) is None:
                return
            if ok:
                lifecycle.operation_done(op, {}, utcnow())
            else:
                if lifecycle.operation_failed(op, "NOT_A_REASON", "no", utcnow()):
                    assert op.error is not None and op.error["code"] == "INTERNAL_ERROR"
            if ready:
                lifecycle.client_ready(client, utcnow())

        if self._client_move(work, made):
            self._op_is(seq, target)
            if ready and self._op_exists(seq):
                assert self._client_rows()[0] == ClientStatus.READY

    @rule(ending=st.sampled_from((ClientStatus.FAILED, ClientStatus.LOST, ClientStatus.DELETED)))
    def end(self, ending: ClientStatus) -> None:
        """The client ends, whatever its state (only a live one may): its calls not
        answered fail CLIENT_GONE, its hold goes back."""

        def made(client: ClientRow) -> bool:
            return allowed(CLIENT_MOVES, client.status, ending)

        def work(session: Session, client: ClientRow) -> None:
            lifecycle.end_client(session, client, ending, "executor_lost", utcnow())

        if self._client_move(work, made):
            status, ops, holds = self._client_rows()
            assert status == ending
            assert all(s not in OPERATION_PENDING for _, s in ops)
            assert holds == [HoldStatus.RELEASED]

    @rule()
    def release_hold(self) -> None:
        with self.opened().unit() as session:
            lifecycle.release_holds(session, task_id=self.client_id, now=utcnow())
        assert self._client_rows()[2] == [HoldStatus.RELEASED]

    @rule()
    def store_object(self) -> None:
        """An upload read back: a pending object is stored; a stored one again is a no-op."""
        with self.opened().unit(write=False) as session:
            row = session.get(ObjectRow, ("acme", self.sha256))
            assert row is not None
            allow = allowed(OBJECT_MOVES, row.status, ObjectStatus.STORED)
            was = row.status
        now = utcnow()
        with self.opened().unit() as session:
            row = session.get(ObjectRow, ("acme", self.sha256))
            assert row is not None
            moved = lifecycle.object_stored(row, now, now + dt.timedelta(days=1))
        assert allow and moved == (was == ObjectStatus.PENDING)
        with self.opened().unit(write=False) as session:
            row = session.get(ObjectRow, ("acme", self.sha256))
            assert row is not None and row.status == ObjectStatus.STORED
            assert row.upload_id == "" and row.grant_expires is None

    def _op_allows(self, seq: int, target: str) -> bool:
        ops = dict(self._client_rows()[1])
        return seq not in ops or allowed(OPERATION_MOVES, ops[seq], target)

    def _op_exists(self, seq: int) -> bool:
        return seq in dict(self._client_rows()[1])

    def _op_is(self, seq: int, target: str) -> None:
        """After an allowed move the call, if it exists, is in `target`."""
        ops = dict(self._client_rows()[1])
        assert ops.get(seq, target) == target

    # -- what always holds ----------------------------------------------------------------

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

    @invariant()
    def clients_agree(self) -> None:
        if not hasattr(self, "client_id"):
            return
        status, ops, holds = self._client_rows()
        assert status in set(ClientStatus) and all(s in set(OperationStatus) for _, s in ops)
        assert all(h in set(HoldStatus) for h in holds)
        if status not in CLIENT_LIVE:  # an ended client has nothing pending, nothing held
            assert all(s not in OPERATION_PENDING for _, s in ops)
            assert holds == [HoldStatus.RELEASED]
        if status == ClientStatus.READY:
            assert ops[0][1] == OperationStatus.DONE  # its create was answered


def new_attempt(job_id: str, number: int) -> AttemptRow:
    return AttemptRow(
        id=ids.new_id("att"),
        job_id=job_id,
        org="acme",
        attempt_number=number,
        status=A.QUEUED,
        create_time=utcnow(),
    )


def new_operation(client_id: str, seq: int, now: dt.datetime) -> OperationRow:
    return OperationRow(
        id=ids.new_id("fut"),
        client_id=client_id,
        seq=seq,
        kind="create" if seq == 0 else "optim_step",
        input={},
        input_sha256="",
        status=OperationStatus.QUEUED,
        create_time=now,
    )


Lifecycle.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLifecycle = Lifecycle.TestCase
