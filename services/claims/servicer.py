"""ClaimService over gRPC: the executor stream and the unary REST routes, one core. Proto
in, a call of the service (or the stream session), proto out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from services.claims.service import ClaimService
from services.claims.stream import ExecutorStream, poll_claim
from services.core import context, errors, validation
from services.core.offers import Offer
from services.core.rpc import REST_STATUS
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]
MAX_WAIT_SECONDS = 25


class ClaimServicer(claim_service_pb2_grpc.ClaimServiceServicer):
    def __init__(self, service: ClaimService, poll_seconds: float = 5.0) -> None:
        """`poll_seconds`: how often a waiting claim tries again when no wake-up came."""
        self._service = service
        self._poll = poll_seconds

    # -- unary routes --------------------------------------------------------------------

    async def ClaimTask(
        self, request: claim_service_pb2.ClaimTaskRequest, ctx: Ctx
    ) -> claim_service_pb2.ClaimTaskResponse:
        request = validation.read_body(request)
        if not 0 <= request.wait <= MAX_WAIT_SECONDS:
            raise errors.ValidationError("wait", "must be between 0 and 25 seconds")
        principal = context.principal()
        offer = Offer.parse(
            request.machine, request.platform, request.bases, request.devices, request.supports
        )
        wait = request.wait or MAX_WAIT_SECONDS
        found = await poll_claim(self._service, principal, offer, wait, self._poll)
        if not found.HasField("task"):
            # Nothing came in time: REST answers HIP-1333 §5's `204` with no body.
            await ctx.send_initial_metadata(((REST_STATUS, "204"),))
        return found

    async def ReportTask(
        self, request: claim_service_pb2.ReportTaskRequest, ctx: Ctx
    ) -> claim_service_pb2.ReportTaskResponse:
        request = validation.read_body(request)
        principal = context.principal()
        if request.id == request.task:  # a client names itself as its job: a heartbeat
            return await asyncio.to_thread(
                self._service.engines.renew, principal, request.task, request.lease
            )
        return await asyncio.to_thread(
            self._service.reports.report,
            principal,
            request.id,
            request.task,
            request.lease,
            list(request.events),
        )

    async def RegisterTaskArtifact(
        self, request: claim_service_pb2.RegisterTaskArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Grant:
        request = validation.read_body(request)
        service = self._service
        # A client's call names the client as its own job.
        grant = (
            service.engines.grant
            if request.id == request.task
            else service.leases.register_artifact
        )
        return await asyncio.to_thread(grant, context.principal(), request)

    async def ReadTaskInput(
        self, request: claim_service_pb2.ReadTaskInputRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        request = validation.read_body(request)
        service = self._service
        # A client's call names the client as its own job: what it reads is its `from`.
        read = (
            service.engines.read_input if request.id == request.task else service.leases.read_input
        )
        return await asyncio.to_thread(read, context.principal(), request)

    # -- the stream ----------------------------------------------------------------------

    async def Connect(
        self, requests: AsyncIterator[claim_service_pb2.ConnectRequest], ctx: Ctx
    ) -> AsyncIterator[claim_service_pb2.ConnectResponse]:
        principal = context.principal()
        first = await anext(aiter(requests), None)
        if first is None or first.WhichOneof("kind") != "hello":
            raise errors.ValidationError("hello", "must be the stream's first message")
        stream, welcome = await ExecutorStream.open(
            self._service, principal, first.hello, self._poll
        )
        yield claim_service_pb2.ConnectResponse(welcome=welcome)
        # Closed with this call, not when the collector gets to it: gRPC closes a stream the
        # peer reset at the `yield` it waits on, and the session's end (its claimer stopped,
        # the executor gone, what it never delivered given back) must follow at once.
        async with contextlib.aclosing(stream.run(requests)) as messages:
            async for message in messages:
                yield message
