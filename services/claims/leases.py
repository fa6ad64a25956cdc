"""Leases: an executor's hello and goodbye, claims (the lease token shown once and kept as
its sha256, fenced by an epoch), a task given back, the sweep that ends lapsed leases, the
cancels a stream passes on, and the calls an executor makes under a lease (an output's
registration, an input read).

The lease row is the truth, not the stream: every call under a lease checks, in its own
transaction, that the lease presented is the task's current one and has not lapsed
(`services.claims.fencing`).
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Callable, Collection, Sequence

from sqlalchemy.orm import Session

from services.claims import store
from services.claims.fencing import (
    MAX_HELD,
    acting_on,
    check_platform,
    grant_output,
    holds,
    lease_lost,
    lease_sha256,
    may_act,
)
from services.claims.store import ExecutorRow
from services.core import audit, errors, ids, lifecycle, view
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.money import rates, windows
from services.core.offers import Offer
from services.core.states import JobStatus, TaskStatus
from services.core.store import Store, utcnow
from services.core.tables import JobRow, TaskRow
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.training.catalog import Catalog

# The most abandoned leases one hello ends (an executor runs at most 64 tasks at once).
MAX_ABANDONED = 64

log = logging.getLogger(__name__)


class Leases:
    def __init__(
        self,
        db: Store,
        config: Config,
        artifacts: ArtifactClient | None = None,
        catalog: Catalog | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._db = db
        self._config = config
        self._artifacts = artifacts
        self._catalog = catalog or Catalog()
        self._now = clock
        self._policy = windows.Policy.of(config)

    @property
    def policy(self) -> windows.Policy:
        return self._policy

    @property
    def ttl(self) -> dt.timedelta:
        return dt.timedelta(seconds=self._config.lease_ttl_seconds)

    # -- the executor's connection ---------------------------------------------------------

    def hello(
        self,
        principal: Principal,
        offer: Offer,
        leases: Sequence[tuple[str, str]],
        previous: str = "",
    ) -> tuple[str, list[str], list[str]]:
        """Register a connecting executor; sort the leases it still holds into those that
        still stand (it goes on with them) and those that were lost. `previous`, its
        session before a reconnect, is over: what was leased to it and is not named here
        never reached the executor, and is given back."""
        check_platform(principal, offer.platform)
        executor_id, resumed, lost = self._register(principal, offer, leases)
        if previous:
            self.goodbye(previous, {task for task, _ in leases}, owner=principal)
        return executor_id, resumed, lost

    def _register(
        self, principal: Principal, offer: Offer, leases: Sequence[tuple[str, str]]
    ) -> tuple[str, list[str], list[str]]:
        now = self._now()
        resumed, lost = [], []
        with self._db.unit() as session:
            executor = ExecutorRow(
                id=ids.new_id("exe"),
                org=principal.org,
                key_id=principal.key_id,
                machine=offer.machine,
                platform=offer.platform,
                offer=offer.to_json(),
                connected=True,
                create_time=now,
                last_seen=now,
            )
            session.add(executor)
            for task_id, token in leases:
                task = store.task(session, task_id, lock=True)
                if task is not None and may_act(principal, task) and holds(task, token, now):
                    task.executor_id, task.lease_expires = executor.id, now + self.ttl
                    resumed.append(task_id)
                else:
                    lost.append(task_id)
            return executor.id, resumed, lost

    def announce(self, executor_id: str, offer: Offer) -> None:
        with self._db.unit() as session:
            row = store.executor(session, executor_id)
            if row is not None:
                row.offer, row.last_seen = offer.to_json(), self._now()

    def abandon(self, principal: Principal, leases: Sequence[tuple[str, str]]) -> int:
        """End the tasks an executor's earlier process held when it ended (a crash, a
        kill): none runs anywhere now, so each whose lease still holds is lost as a lapse
        would lose it, without waiting for that."""

        def work() -> int:
            now, lost = self._now(), 0
            with self._db.unit() as session:
                for task_id, token in leases[:MAX_ABANDONED]:
                    found = store.task(session, task_id)
                    if found is None or not may_act(principal, found):
                        continue
                    job = store.job(session, found.job_id, lock=True)
                    task = store.task(session, task_id, lock=True)
                    if job is not None and task is not None and holds(task, token, now):
                        lifecycle.lose(session, job, task)
                        lost += 1
            if lost:
                log.info("%d tasks an executor's earlier process held were lost", lost)
            return lost

        return store.retry(work)

    def goodbye(
        self, executor_id: str, delivered: Collection[str] = (), *, owner: Principal | None = None
    ) -> int:
        """The executor's stream ended. A task leased to it that it never got (its claim
        committed as the stream was ending, or, said at its reconnect, its assignment was
        lost on the way) is given back at once, open for another claim, rather than held
        until its lease lapses; how many. With `owner` (the executor saying so at its
        reconnect), a session another key opened ends nothing."""

        def work() -> int:
            given = 0
            with self._db.unit() as session:
                row = store.executor(session, executor_id)
                if owner is not None and (
                    row is None or (row.org, row.key_id) != (owner.org, owner.key_id)
                ):
                    return 0
                if row is not None:
                    row.connected, row.last_seen = False, self._now()
                for found in store.leased_to(session, executor_id):
                    if found.id in delivered:
                        continue
                    job = store.job(session, found.job_id, lock=True)
                    task = store.task(session, found.id, lock=True)
                    assert job is not None and task is not None
                    if task.status == TaskStatus.LEASED and task.executor_id == executor_id:
                        lifecycle.release(session, job, task)
                        task.lease_sha256, task.executor_id = "", ""
                        given += 1
            if given:
                log.info("%d tasks the executor never got were given back", given)
            return given

        return store.retry(work)

    # -- claims ----------------------------------------------------------------------------

    def claim(
        self, principal: Principal, offer: Offer, executor_id: str = "", *, probe: bool = False
    ) -> claim_service_pb2.ClaimTaskResponse | None:
        """Lease the oldest open task this executor may run, or None. `probe`: most
        likely none is open (no wake-up said so), so a read without a transaction, one
        statement, asks first."""
        check_platform(principal, offer.platform)
        if probe or (self._db.dialect == "sqlite" and offer.platform):
            # Read first, so executors a wake-up woke with nothing to claim never queue for
            # SQLite's one write lock (a platform task wakes every platform executor; an
            # org's wakes those on the machine it names, most often one, which claims it
            # at once); PostgreSQL's claim skips locked rows, but a read without a
            # transaction is one statement to its three.
            with self._db.unit(write=False) as session:
                if not store.any_open_task(
                    session, org=principal.org, machine=offer.machine, platform=offer.platform
                ):
                    return None
        try:
            return store.retry(lambda: self._claim(principal, offer, executor_id))
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
        with self._db.unit() as session:
            candidates = store.claim_candidates(
                session, org=principal.org, machine=offer.machine, platform=offer.platform
            )
            for task, job in candidates:
                spec = job.frozen()
                device = offer.device_for(spec, self._catalog)
                if device is None:
                    continue
                # The first window, held on as many devices as the payer holds (§10).
                held = windows.open_hold(
                    session,
                    self._policy,
                    org=job.org,
                    job_id=job.id,
                    project=job.project,
                    resources=spec.resources,
                    task_id=task.id,
                    epoch=task.epoch + 1,
                    meter=rates.compute_meter(spec.base_model, device),
                    charged=task.machine == "",
                    offered=offer.devices.count(device) if task.world_size == 1 else 1,
                    halve=offer.platform,
                    now=now,
                    key_id=job.key_id,
                    # Holds are made by claims only, and an attempt's joins are claimed
                    # after its lead: a first attempt's lead never claimed holds nothing.
                    first=task.role == "lead" and task.epoch == 0 and job.attempt_count == 1,
                )
                if isinstance(held, windows.Refusal):
                    if held.final:  # no later claim could hold it: stopped before it runs
                        attempt = lifecycle.current_attempt(session, job)
                        lifecycle.fail(
                            session, job, attempt, held.reason, job_status=JobStatus.STOPPED
                        )
                    continue  # else the payer's other work holds its money: a later claim
                token = "trl_" + secrets.token_urlsafe(32)
                # The lease's fields before the move, so the task is written once.
                task.lease_sha256, task.epoch = lease_sha256(token), task.epoch + 1
                task.lease_expires, task.claim_time, task.report_time = now + self.ttl, now, now
                task.executor_id, task.device, task.cancel_sent = executor_id, device, False
                task.devices, task.held = held.devices, min(held.held, MAX_HELD)
                lifecycle.lease(session, job, task)
                if task.role == "join":
                    lead = store.lead_of(session, task)
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
                        session,
                        "training.claim.platform",
                        org=job.org,
                        subject=task.id,
                        actor=principal.key_id,
                        job=job.id,
                        machine=offer.machine,
                        device=device,
                        devices=task.devices,
                        held=task.held,
                        meter=rates.compute_meter(spec.base_model, device),
                        rate=held.rate,
                        payer=job.org,
                    )
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

    def _task_proto(self, task: TaskRow, token: str) -> task_pb2.Task:
        return task_pb2.Task(
            id=task.id,
            job=task.job_id,
            role=task.role,
            lease=token,
            coordinator=task.coordinator,
            device=task.device,
            devices=task.devices,
            held=task.held,
            report=self._config.report_seconds,
            epoch=task.epoch,
            rank=task.position,
            world_size=task.world_size,
            attempt_number=task.attempt_number,
        )

    # -- leases kept, given back and lapsed ------------------------------------------------

    def renew(self, principal: Principal, job_id: str, task_id: str, token: str) -> None:
        """Extend a held lease and nothing else: the executor is alive and trying."""
        now = self._now()
        with self._db.unit() as session:
            task = acting_on(session, principal, job_id, task_id, lock=True)
            if holds(task, token, now):
                task.lease_expires, task.report_time = now + self.ttl, now

    def release(self, principal: Principal, task_id: str, token: str) -> None:
        """An executor gives a task back unrun: it is open for another claim."""

        def work() -> None:
            with self._db.unit() as session:
                found = store.task(session, task_id)
                if found is None or not may_act(principal, found):
                    raise lease_lost()
                job = store.job(session, found.job_id, lock=True)
                task = store.task(session, task_id, lock=True)
                assert job is not None and task is not None
                if not holds(task, token, self._now()):
                    raise lease_lost()
                lifecycle.release(session, job, task)
                task.lease_sha256, task.executor_id = "", ""

        store.retry(work)

    def expire(self) -> int:
        """End every task whose lease lapsed. Idempotent, and safe with several replicas:
        each task is taken under `FOR UPDATE SKIP LOCKED` on PostgreSQL."""

        def work() -> int:
            now = self._now()
            with self._db.unit() as session:
                lost = 0
                for task in store.lapsed_leases(session, now):
                    # Taken without waiting, as a claim does: a writer holding the job
                    # locks its tasks next, so waiting here could deadlock with it.
                    job = store.job_unless_locked(session, task.job_id)
                    if job is not None:
                        lifecycle.lose(session, job, task)
                        lost += 1
                return lost

        return store.retry(work)

    def cancels_due(self, executor_id: str) -> list[tuple[str, str]]:
        """Tasks of this executor whose job wants them stopped, each told once."""
        # Most wake-ups that ask find none (a job its own executor's report ended): a
        # read without a transaction, one statement, asks first.
        with self._db.unit(write=False) as session:
            if not store.cancels_due(session, executor_id):
                return []

        def work() -> list[tuple[str, str]]:
            with self._db.unit() as session:
                due = store.cancels_due(session, executor_id)
                for task, _ in due:
                    task.cancel_sent = True
                return [(task.id, status) for task, status in due]

        return store.retry(work)

    def job_of(self, task_id: str) -> str:
        with self._db.unit(write=False) as session:
            task = store.task(session, task_id)
            if task is None:
                raise errors.NotFound()
            return task.job_id

    # -- calls under a lease ---------------------------------------------------------------

    def register_artifact(
        self, principal: Principal, request: claim_service_pb2.RegisterTaskArtifactRequest
    ) -> artifact_pb2.Grant:
        """A grant to upload an output of the task, from ArtifactService."""
        org, _ = store.retry(
            lambda: self._held_task(principal, request.id, request.task, request.lease)
        )
        return grant_output(self._artifacts, org, request.id, request)

    def read_input(
        self, principal: Principal, request: claim_service_pb2.ReadTaskInputRequest
    ) -> artifact_pb2.Artifact:
        """Where to download an object the task reads; NOT_FOUND for any other."""
        org, inputs = store.retry(
            lambda: self._held_task(principal, request.id, request.task, request.lease)
        )
        if request.sha256 not in inputs:
            raise errors.NotFound()
        if self._artifacts is None:
            raise errors.Unavailable()
        return self._artifacts.describe(org, request.sha256)

    def _held_task(
        self, principal: Principal, job_id: str, task_id: str, token: str
    ) -> tuple[str, set[str]]:
        """For a call an executor makes under its lease: the lease renewed, and the task's
        org and the objects it may read."""
        now = self._now()
        with self._db.unit() as session:
            task = acting_on(session, principal, job_id, task_id, lock=True)
            if not holds(task, token, now):
                raise lease_lost()
            task.lease_expires, task.report_time = now + self.ttl, now
            job = store.job(session, job_id)
            assert job is not None
            return task.org, _inputs(session, job)


def _inputs(session: Session, job: JobRow) -> set[str]:
    """What a task of the job reads: its dataset snapshot, the adapter its `from` names
    and, for an attempt that resumes, the state it continues from."""
    found = {job.dataset_sha256, job.from_sha256}
    if lifecycle.current_attempt(session, job).resume_from_checkpoint and job.result:
        found.add(str(job.result.get("checkpoint_sha256", "")))
    return found - {""}
