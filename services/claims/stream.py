"""How ClaimService waits on an executor's behalf: the unary claim's long poll, and the
session of one executor's stream (`Connect`).

The stream is transport only: a session pushes what the lease rows say (assignments,
cancels) and applies what the executor sends through the same calls the unary routes
make. When it breaks, the executor reconnects and goes on with the leases that stand."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator

from services.claims.operations import ClientOperator
from services.claims.service import ClaimService
from services.core import errors, trace
from services.core.auth import Principal
from services.core.offers import Offer
from services.core.states import TERMINAL
from services.core.wakeups import executor_topic, woken
from trainyard.claim.v1 import claim_service_pb2

log = logging.getLogger(__name__)
# How long a cancelled task's trainer has to save what it trained before it is killed.
CANCEL_GRACE_SECONDS = 60
# The most reports a stream holds while it applies one, and applies together after.
REPORTS_TOGETHER = 16


def _same_lease(
    message: claim_service_pb2.ConnectRequest, first: claim_service_pb2.StreamReport
) -> bool:
    """Whether `message` is a report on `first`'s task under the same lease."""
    report = message.report
    return message.WhichOneof("kind") == "report" and (report.task, report.lease) == (
        first.task,
        first.lease,
    )


async def poll_claim(
    service: ClaimService, principal: Principal, offer: Offer, wait: float, poll: float
) -> claim_service_pb2.ClaimTaskResponse:
    """A task leased within `wait` seconds, or the empty answer: tried again on each
    wake-up (work became claimable), else every `poll` seconds."""
    deadline = time.monotonic() + wait
    with service.wakeups.watching(offer.claimable(principal.org)) as event:
        while True:
            event.clear()
            found = await asyncio.to_thread(service.claim, principal, offer)
            if found is not None:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                return claim_service_pb2.ClaimTaskResponse()
            await woken(event, min(left, poll))


class ExecutorStream:
    """One executor's stream: a reader applying what it sends, a claimer pushing tasks
    while it has free slots (and cancels when a job wants its task stopped), an operator
    pushing its training clients' operations in order (and a cancel for a client that
    ended), one queue of answers."""

    def __init__(
        self,
        service: ClaimService,
        principal: Principal,
        offer: Offer,
        executor_id: str,
        slots: int,
        held: set[str],
        clients: set[str],
        poll: float,
    ) -> None:
        """`held`: the tasks and clients the executor goes on with; `clients`: the ids of
        those (and of any it named) that are training clients."""
        self._service, self._principal, self._offer = service, principal, offer
        self._executor_id, self._slots, self._poll = executor_id, slots, poll
        self._held = held - clients
        # The tasks this stream handed the executor: those it resumed, and each assignment
        # once handed to the transport. A claim that committed as the stream ended, never
        # delivered, is given back when it ends (`goodbye`).
        self._delivered = set(self._held)
        self._claiming: asyncio.Future[claim_service_pb2.ClaimTaskResponse | None] | None = None
        self._out: asyncio.Queue[claim_service_pb2.ConnectResponse | None] = asyncio.Queue()
        # Set to claim and check cancels again: by a wake-up, or a slot freed here.
        self._woken = asyncio.Event()
        # Set by a wake-up for claimable work: the next claim locks at once, where one no
        # such wake-up started (a slot freed, the poll) reads first whether any is open.
        self._opened = asyncio.Event()
        # Set by a wake-up for a job that wants a task here stopped, and by the poll (a
        # wake-up lost, or one sent before the stream began): cancels are read then only.
        self._stopping = asyncio.Event()
        self._stopping.set()
        self._operator = ClientOperator(service, principal, executor_id, self._out, held, clients)
        self._jobs: dict[str, str] = {}

    @classmethod
    async def open(
        cls,
        service: ClaimService,
        principal: Principal,
        hello: claim_service_pb2.Hello,
        poll: float,
    ) -> tuple[ExecutorStream, claim_service_pb2.Welcome]:
        """Register the executor that said `hello`; its session, and the welcome that
        says which of the leases it named still stand."""
        offer = Offer.parse(
            hello.machine,
            hello.platform,
            hello.bases,
            hello.devices,
            hello.supports,
            hello.clients,
            hello.slots,
        )
        leases = [(held.task, held.lease) for held in hello.leases]
        abandoned = [(held.task, held.lease) for held in hello.abandoned]
        executor_id, resumed, lost, clients = await asyncio.to_thread(
            service.hello, principal, offer, leases, abandoned, hello.previous
        )
        slots = max(1, hello.slots)
        stream = cls(service, principal, offer, executor_id, slots, set(resumed), clients, poll)
        return stream, claim_service_pb2.Welcome(
            executor_id=executor_id, resumed=resumed, lost=lost
        )

    async def run(
        self, requests: AsyncIterator[claim_service_pb2.ConnectRequest]
    ) -> AsyncGenerator[claim_service_pb2.ConnectResponse, None]:
        tasks = [asyncio.create_task(self._read(requests)), asyncio.create_task(self._claim())]
        if self._offer.clients:
            tasks.append(asyncio.create_task(self._operator.run()))
        connected = self._service.metrics.executors
        connected.inc()
        try:
            while (message := await self._out.get()) is not None:
                kind = message.WhichOneof("kind")
                if kind == "assignment":
                    trace.hop("assignment.sent", job=message.assignment.job.id)
                    # Delivered once handed to the transport: a stream that breaks as it goes
                    # out cannot tell whether the executor got it (closed at the yield, this
                    # generator never learns the write ended), so the lease stands. At its
                    # reconnect the executor names it if it got it; if not, the hello gives
                    # it back (`Hello.previous`).
                    self._delivered.add(message.assignment.task.id)
                elif kind == "ack":
                    trace.hop("ack.sent", task=message.ack.task)
                yield message
        finally:
            connected.dec()
            for task in tasks:
                task.cancel()
            # Ended first, so none begins a claim; then the last claim begun commits, or
            # not, before the goodbye gives back what the stream never delivered.
            await asyncio.gather(*tasks, return_exceptions=True)
            if (claiming := self._claiming) is not None:
                await asyncio.wait([claiming])
                if not claiming.cancelled() and (failed := claiming.exception()):
                    log.warning("a claim as the stream ended failed", exc_info=failed)
            await asyncio.to_thread(self._service.goodbye, self._executor_id, self._delivered)

    # -- what the executor sends -----------------------------------------------------------

    async def _read(self, requests: AsyncIterator[claim_service_pb2.ConnectRequest]) -> None:
        """Apply what the executor sends, in order. What comes while a report is applied
        waits in a short inbox (the stream's flow control holds the rest back), and the
        reports of one task waiting there are applied together: one commit for them all."""
        inbox: asyncio.Queue[claim_service_pb2.ConnectRequest | None] = asyncio.Queue(
            REPORTS_TOGETHER
        )

        async def receive() -> None:
            try:
                async for message in requests:
                    if message.WhichOneof("kind") == "report":
                        trace.hop("report.received", task=message.report.task)
                    await inbox.put(message)
            except Exception:
                log.exception("executor stream read failed")
            await inbox.put(None)  # the end; cancelled (the loop below ended), none is needed

        receiving = asyncio.create_task(receive())
        # Taken from the inbox while gathering reports, not applied yet (None: the end).
        taken: collections.deque[claim_service_pb2.ConnectRequest | None] = collections.deque()
        try:
            while (message := taken.popleft() if taken else await inbox.get()) is not None:
                if message.WhichOneof("kind") != "report":
                    await self._apply(message)
                    continue
                reports = [message.report]
                while len(reports) < REPORTS_TOGETHER and not inbox.empty():
                    following = inbox.get_nowait()
                    if following is None or not _same_lease(following, message.report):
                        taken.append(following)
                        break
                    reports.append(following.report)
                for ack in await self._reports(reports):
                    await self._out.put(ack)
        except Exception:
            log.exception("executor stream apply failed")
        finally:
            receiving.cancel()
            await self._out.put(None)

    async def _apply(self, message: claim_service_pb2.ConnectRequest) -> None:
        kind = message.WhichOneof("kind")
        if kind == "artifact":
            await self._out.put(await self._grant(message.artifact))
        elif kind == "release":
            with contextlib.suppress(errors.DomainError):
                await asyncio.to_thread(self._release, message.release)
            self._freed(message.release.task)
            self._operator.released(message.release.task)
        elif kind == "result":
            await self._operator.result(message.result)
        elif kind == "announcement":
            await self._announce(message.announcement)

    def _release(self, release: claim_service_pb2.Release) -> None:
        if not self._operator.serves(release.task):
            self._service.leases.release(self._principal, release.task, release.lease)
        elif not release.lease:  # the executor holds no engine for the client
            self._service.engines.disown(self._executor_id, release.task)
        else:
            self._service.engines.release(
                self._principal, release.task, release.lease, release.reason
            )

    async def _reports(
        self, reports: list[claim_service_pb2.StreamReport]
    ) -> list[claim_service_pb2.ConnectResponse]:
        """The acks of reports of one task under one lease, applied together when they
        are a task's (a client's heartbeats go one by one)."""
        first = reports[0]
        if len(reports) == 1 or self._operator.serves(first.task):
            return [await self._report(report) for report in reports]
        try:
            answers = await asyncio.to_thread(
                self._service.reports.report_together,
                self._principal,
                await self._job_of(first.task),
                first.task,
                first.lease,
                [list(report.events) for report in reports],
            )
        except errors.DomainError as exc:
            answers = [exc] * len(reports)
        return [self._ack(first.task, answer) for answer in answers]

    async def _report(
        self, report: claim_service_pb2.StreamReport
    ) -> claim_service_pb2.ConnectResponse:
        try:
            if self._operator.serves(report.task):  # a client's heartbeat: it carries no events
                answer = await asyncio.to_thread(
                    self._service.engines.renew, self._principal, report.task, report.lease
                )
            else:
                answer = await asyncio.to_thread(
                    self._service.reports.report,
                    self._principal,
                    await self._job_of(report.task),
                    report.task,
                    report.lease,
                    list(report.events),
                )
        except errors.DomainError as exc:
            return self._ack(report.task, exc)
        return self._ack(report.task, answer)

    def _ack(
        self,
        task_id: str,
        answer: claim_service_pb2.ReportTaskResponse | errors.DomainError,
    ) -> claim_service_pb2.ConnectResponse:
        """A report's ack; a task the answer ended, or lost, frees its slot."""
        if isinstance(answer, errors.DomainError):
            if answer.reason in ("LEASE_LOST", "NOT_FOUND"):
                self._freed(task_id)
            return claim_service_pb2.ConnectResponse(
                ack=claim_service_pb2.Ack(task=task_id, reason=answer.reason)
            )
        if answer.status in TERMINAL:
            self._freed(task_id)
        return claim_service_pb2.ConnectResponse(
            ack=claim_service_pb2.Ack(
                task=task_id,
                seq=answer.seq,
                held=answer.held,
                cancel=answer.cancel,
                status=answer.status,
            )
        )

    async def _job_of(self, task_id: str) -> str:
        """The job of a task this executor reports on (a task never changes job); a
        client, as its own calls name it, stands for itself."""
        if self._operator.serves(task_id):
            return task_id
        if task_id not in self._jobs:
            self._jobs[task_id] = await asyncio.to_thread(self._service.leases.job_of, task_id)
        return self._jobs[task_id]

    async def _grant(
        self, registration: claim_service_pb2.ArtifactRegistration
    ) -> claim_service_pb2.ConnectResponse:
        try:
            job_id = await self._job_of(registration.task)
            request = claim_service_pb2.RegisterTaskArtifactRequest(
                id=job_id,
                task=registration.task,
                lease=registration.lease,
                kind=registration.kind,
                name=registration.name,
                sha256=registration.sha256,
                size=registration.size,
                meta=registration.meta,
            )
            service = self._service
            grants = (
                service.engines.grant
                if self._operator.serves(request.task)
                else service.leases.register_artifact
            )
            grant = await asyncio.to_thread(grants, self._principal, request)
        except errors.DomainError as exc:
            return claim_service_pb2.ConnectResponse(
                grant=claim_service_pb2.StreamGrant(
                    request_id=registration.request_id, reason=exc.reason
                )
            )
        return claim_service_pb2.ConnectResponse(
            grant=claim_service_pb2.StreamGrant(request_id=registration.request_id, grant=grant)
        )

    async def _announce(self, announcement: claim_service_pb2.Announcement) -> None:
        """Take the bases the executor now trains: kept for creates and estimates, and
        a claim pass at once for what they make claimable."""
        try:
            offer = self._offer.with_bases(announcement.bases)
        except errors.DomainError as exc:
            log.warning("announcement refused: %s", exc.reason)
            return
        await asyncio.to_thread(self._service.announce, self._executor_id, offer)
        self._offer = offer
        self._opened.set()
        self._woken.set()

    # -- what the service pushes -----------------------------------------------------------

    async def _claim(self) -> None:
        """Lease tasks while slots are free and push cancels, each time work became
        claimable or a job wants its tasks stopped (whichever process committed it), or a
        slot freed here; else every `poll` seconds, the safety net for a wake-up lost."""
        claimable = self._offer.claimable(self._principal.org)
        stops = executor_topic(self._executor_id)
        wakeups = self._service.wakeups
        with (
            wakeups.watching(claimable, stops, event=self._woken),
            wakeups.watching(claimable, event=self._opened),
            wakeups.watching(stops, event=self._stopping),
        ):
            while True:
                self._woken.clear()
                try:
                    await self._claim_pass()
                except errors.DomainError as exc:
                    log.warning("claim refused: %s", exc.reason)
                except Exception:
                    log.exception("claim pass failed")
                # Spread: a thousand idle streams do not poll in step.
                if not await woken(self._woken, self._poll * random.uniform(0.5, 1.5)):
                    self._stopping.set()

    async def _claim_pass(self) -> None:
        trace.hop("claim.pass")
        claimed = False
        while len(self._held) < self._slots:
            # Read first unless woken for claimable work, or more may follow a claim.
            probe = not (self._opened.is_set() or claimed)
            self._opened.clear()
            # Shielded: a stream ending does not abandon a claim it began; the end waits
            # for it, and gives back what it leased.
            self._claiming = asyncio.ensure_future(
                asyncio.to_thread(
                    self._service.claim,
                    self._principal,
                    self._offer,
                    self._executor_id,
                    probe=probe,
                )
            )
            found = await asyncio.shield(self._claiming)
            if found is None:
                break
            claimed = True
            trace.hop("claim.committed", job=found.job.id)
            self._held.add(found.task.id)
            assignment = claim_service_pb2.Assignment(org=found.org, task=found.task, job=found.job)
            await self._out.put(claim_service_pb2.ConnectResponse(assignment=assignment))
        if not (self._held and self._stopping.is_set()):
            return
        self._stopping.clear()
        for task_id, reason in await asyncio.to_thread(
            self._service.leases.cancels_due, self._executor_id
        ):
            cancel = claim_service_pb2.Cancel(
                task=task_id, grace=CANCEL_GRACE_SECONDS, reason=reason
            )
            await self._out.put(claim_service_pb2.ConnectResponse(cancel=cancel))

    def _freed(self, task_id: str) -> None:
        self._jobs.pop(task_id, None)
        if task_id in self._held:
            self._held.discard(task_id)
            self._woken.set()
