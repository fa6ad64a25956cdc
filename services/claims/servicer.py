"""ClaimService over gRPC: the executor stream and the unary REST routes, one core."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from services.claims.service import ClaimService, Offer
from services.core import context, errors
from services.core.auth import Principal
from services.core.states import TERMINAL
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc

log = logging.getLogger(__name__)
Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]
MAX_WAIT_SECONDS = 25


class ClaimServicer(claim_service_pb2_grpc.ClaimServiceServicer):
    def __init__(self, service: ClaimService, poll_seconds: float = 0.2) -> None:
        self._service = service
        self._poll = poll_seconds

    # -- unary routes --------------------------------------------------------------------

    async def ClaimTask(
        self, request: claim_service_pb2.ClaimTaskRequest, ctx: Ctx
    ) -> claim_service_pb2.ClaimTaskResponse:
        if not 0 <= request.wait <= MAX_WAIT_SECONDS:
            raise errors.ValidationError("wait", "must be between 0 and 25 seconds")
        principal = context.principal()
        offer = Offer.parse(
            request.machine, request.platform, request.bases, request.devices, request.supports
        )
        deadline = time.monotonic() + (request.wait or MAX_WAIT_SECONDS)
        while True:
            found = await asyncio.to_thread(self._service.claim, principal, offer)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                return claim_service_pb2.ClaimTaskResponse()
            await asyncio.sleep(self._poll)

    async def ReportTask(
        self, request: claim_service_pb2.ReportTaskRequest, ctx: Ctx
    ) -> claim_service_pb2.ReportTaskResponse:
        return await asyncio.to_thread(
            self._service.report,
            context.principal(),
            request.id,
            request.task,
            request.lease,
            list(request.events),
        )

    async def RegisterTaskArtifact(
        self, request: claim_service_pb2.RegisterTaskArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Grant:
        return await asyncio.to_thread(
            self._service.register_artifact, context.principal(), request
        )

    async def ReadTaskInput(
        self, request: claim_service_pb2.ReadTaskInputRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        return await asyncio.to_thread(self._service.read_input, context.principal(), request)

    # -- the stream ----------------------------------------------------------------------

    async def Connect(
        self, requests: AsyncIterator[claim_service_pb2.ConnectRequest], ctx: Ctx
    ) -> AsyncIterator[claim_service_pb2.ConnectResponse]:
        principal = context.principal()
        first = await anext(aiter(requests), None)
        if first is None or first.WhichOneof("kind") != "hello":
            raise errors.ValidationError("hello", "must be the stream's first message")
        hello = first.hello
        offer = Offer.parse(
            hello.machine, hello.platform, hello.bases, hello.devices, hello.supports
        )
        leases = [(held.task, held.lease) for held in hello.leases]
        executor_id, resumed, lost = await asyncio.to_thread(
            self._service.hello, principal, offer, leases
        )
        session = _Session(
            self._service,
            principal,
            offer,
            executor_id,
            max(1, hello.slots),
            set(resumed),
            self._poll,
        )
        yield claim_service_pb2.ConnectResponse(
            welcome=claim_service_pb2.Welcome(executor_id=executor_id, resumed=resumed, lost=lost)
        )
        async for message in session.run(requests):
            yield message


class _Session:
    """One executor's stream: a reader applying what it sends, a claimer pushing tasks
    while it has free slots (and cancels when a job wants its task stopped), one queue
    of answers."""

    def __init__(
        self, service: ClaimService, principal: Principal, offer: Offer, executor_id: str, slots: int,
        held: set[str], poll: float,
    ) -> None:  # fmt: skip
        self._service, self._principal, self._offer = service, principal, offer
        self._executor_id, self._slots, self._held, self._poll = executor_id, slots, held, poll
        self._out: asyncio.Queue[claim_service_pb2.ConnectResponse | None] = asyncio.Queue()
        self._next_cancel_check = 0.0

    async def run(
        self, requests: AsyncIterator[claim_service_pb2.ConnectRequest]
    ) -> AsyncIterator[claim_service_pb2.ConnectResponse]:
        tasks = [asyncio.create_task(self._read(requests)), asyncio.create_task(self._claim())]
        try:
            while (message := await self._out.get()) is not None:
                yield message
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.to_thread(self._service.goodbye, self._executor_id)

    async def _read(self, requests: AsyncIterator[claim_service_pb2.ConnectRequest]) -> None:
        try:
            async for message in requests:
                kind = message.WhichOneof("kind")
                if kind == "report":
                    await self._out.put(await self._report(message.report))
                elif kind == "artifact":
                    await self._out.put(await self._grant(message.artifact))
                elif kind == "release":
                    with contextlib.suppress(errors.DomainError):
                        await asyncio.to_thread(
                            self._service.release,
                            self._principal,
                            message.release.task,
                            message.release.lease,
                        )
                    self._held.discard(message.release.task)
        except Exception:
            log.exception("executor stream read failed")
        finally:
            await self._out.put(None)

    async def _report(
        self, report: claim_service_pb2.StreamReport
    ) -> claim_service_pb2.ConnectResponse:
        try:
            job_id = await asyncio.to_thread(self._service.job_of, report.task)
            answer = await asyncio.to_thread(
                self._service.report,
                self._principal,
                job_id,
                report.task,
                report.lease,
                list(report.events),
            )
        except errors.DomainError as exc:
            if exc.reason in ("LEASE_LOST", "NOT_FOUND"):
                self._held.discard(report.task)
            return claim_service_pb2.ConnectResponse(
                ack=claim_service_pb2.Ack(task=report.task, reason=exc.reason)
            )
        if answer.status in TERMINAL:
            self._held.discard(report.task)
        return claim_service_pb2.ConnectResponse(
            ack=claim_service_pb2.Ack(
                task=report.task,
                seq=answer.seq,
                held=answer.held,
                cancel=answer.cancel,
                status=answer.status,
            )
        )

    async def _grant(
        self, registration: claim_service_pb2.ArtifactRegistration
    ) -> claim_service_pb2.ConnectResponse:
        try:
            job_id = await asyncio.to_thread(self._service.job_of, registration.task)
            request = claim_service_pb2.RegisterTaskArtifactRequest(
                id=job_id, task=registration.task, lease=registration.lease, kind=registration.kind,
                name=registration.name, sha256=registration.sha256, size=registration.size, meta=registration.meta,
            )  # fmt: skip
            grant = await asyncio.to_thread(
                self._service.register_artifact, self._principal, request
            )
        except errors.DomainError as exc:
            return claim_service_pb2.ConnectResponse(
                grant=claim_service_pb2.StreamGrant(
                    request_id=registration.request_id, reason=exc.reason
                )
            )
        return claim_service_pb2.ConnectResponse(
            grant=claim_service_pb2.StreamGrant(request_id=registration.request_id, grant=grant)
        )

    async def _claim(self) -> None:
        while True:
            try:
                if len(self._held) < self._slots:
                    found = await asyncio.to_thread(
                        self._service.claim, self._principal, self._offer, self._executor_id
                    )
                    if found is not None:
                        self._held.add(found.task.id)
                        await self._out.put(
                            claim_service_pb2.ConnectResponse(
                                assignment=claim_service_pb2.Assignment(
                                    org=found.org, task=found.task, job=found.job
                                )
                            )
                        )
                        continue
                if self._held and time.monotonic() < self._next_cancel_check:
                    await asyncio.sleep(self._poll)
                    continue
                # A busy executor's tasks are checked for cancels once a second, not every
                # tick: the poll would take CPU from the training beside it.
                self._next_cancel_check = time.monotonic() + 1.0
                for task_id, reason in await asyncio.to_thread(
                    self._service.cancels_due, self._executor_id
                ):
                    await self._out.put(
                        claim_service_pb2.ConnectResponse(
                            cancel=claim_service_pb2.Cancel(task=task_id, grace=60, reason=reason)
                        )
                    )
            except errors.DomainError as exc:
                log.warning("claim refused: %s", exc.reason)
            except Exception:
                log.exception("claim pass failed")
            await asyncio.sleep(self._poll)
