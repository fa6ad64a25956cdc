"""ClientService over gRPC: proto in, a call of the service, and the wait for the engine's
answer (in-line within the call's `wait`, else the future with `202` over REST)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import grpc

from services.claims.clients import requests
from services.claims.clients.service import Clients
from services.claims.clients.view import error_of
from services.core import context, errors
from services.core.pagetoken import PageTokens, page_size
from services.core.rpc import REST_STATUS
from services.core.states import ClientStatus
from services.core.wakeups import Wakeups, future_topic, woken
from trainyard.client.v1 import client_pb2, client_service_pb2, client_service_pb2_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]
# How often a waiter reads the rows when no wake-up came (one lost, a lease the sweep ended).
POLL_SECONDS = 0.5
STATUSES = tuple(ClientStatus)


async def until(
    wakeups: Wakeups,
    topic: str,
    read: Callable[[], Awaitable[Any]],
    ended: Callable[[Any], bool],
    wait: float,
) -> Any:
    """Read until `ended` says so or `wait` seconds pass, again each time `topic` is
    published (whichever replica applied the answer) or `POLL_SECONDS` passed; the last
    read."""
    deadline = time.monotonic() + wait
    with wakeups.watching(topic) as event:
        while True:
            event.clear()
            found = await read()
            left = deadline - time.monotonic()
            if ended(found) or left <= 0:
                return found
            await woken(event, min(left, POLL_SECONDS))


def _ended(future: client_pb2.Future) -> bool:
    return future.status in ("done", "failed")


class ClientServicer(client_service_pb2_grpc.ClientServiceServicer):
    def __init__(self, clients: Clients, wakeups: Wakeups, tokens: PageTokens) -> None:
        self._clients = clients
        self._wakeups = wakeups
        self._tokens = tokens

    async def CreateTrainingClient(
        self, request: client_service_pb2.CreateTrainingClientRequest, ctx: Ctx
    ) -> client_pb2.TrainingClient:
        request = requests.read(request)
        wait = requests.wait_seconds(request)
        principal = context.principal()
        client_id, _ = await asyncio.to_thread(self._clients.create, principal, request)
        client, _ = await until(
            self._wakeups,
            future_topic(client_id, 0),
            lambda: asyncio.to_thread(self._clients.created, principal, client_id),
            lambda found: found[1],
            wait,
        )
        return client  # type: ignore[no-any-return]

    async def ListTrainingClients(
        self, request: client_service_pb2.ListTrainingClientsRequest, ctx: Ctx
    ) -> client_service_pb2.ListTrainingClientsResponse:
        if request.status and request.status not in STATUSES:
            raise errors.ValidationError(
                "status",
                "is not one of the accepted values",
                metadata={"supported": ",".join(STATUSES)},
            )
        principal = context.principal()
        size = page_size(request.page_size)
        scope = {"org": principal.org, "method": "ListTrainingClients", "status": request.status}
        position = self._tokens.decode(request.page_token, scope)
        offset = int((position or {}).get("o", 0))
        found, total = await asyncio.to_thread(
            self._clients.page, principal, request.status, offset, size
        )
        more = offset + size < total
        return client_service_pb2.ListTrainingClientsResponse(
            clients=found,
            total_size=total,
            next_page_token=self._tokens.encode({"o": offset + size}, scope) if more else "",
        )

    async def GetTrainingClient(
        self, request: client_service_pb2.GetTrainingClientRequest, ctx: Ctx
    ) -> client_pb2.TrainingClient:
        return await asyncio.to_thread(self._clients.client, context.principal(), request.id)

    async def DeleteTrainingClient(
        self, request: client_service_pb2.DeleteTrainingClientRequest, ctx: Ctx
    ) -> client_pb2.TrainingClient:
        client = await asyncio.to_thread(self._clients.delete, context.principal(), request.id)
        return client

    async def RunForwardBackward(
        self, request: client_service_pb2.RunForwardBackwardRequest, ctx: Ctx
    ) -> client_pb2.Future:
        request = requests.read(request)
        return await self._call(
            ctx, request, "forward_backward", requests.forward_backward_input(request)
        )

    async def RunOptimStep(
        self, request: client_service_pb2.RunOptimStepRequest, ctx: Ctx
    ) -> client_pb2.Future:
        request = requests.read(request)
        return await self._call(ctx, request, "optim_step", requests.optim_step_input(request))

    async def SampleTrainingClient(
        self, request: client_service_pb2.SampleTrainingClientRequest, ctx: Ctx
    ) -> client_pb2.Future:
        request = requests.read(request)
        return await self._call(ctx, request, "sample", requests.sample_input(request))

    async def SaveTrainingClientWeights(
        self, request: client_service_pb2.SaveTrainingClientWeightsRequest, ctx: Ctx
    ) -> client_pb2.Future:
        request = requests.read(request)
        return await self._call(ctx, request, "save_weights", requests.save_weights_input(request))

    async def GetFuture(
        self, request: client_service_pb2.GetFutureRequest, ctx: Ctx
    ) -> client_pb2.Future:
        wait = requests.wait_seconds(request)
        principal = context.principal()
        first = await asyncio.to_thread(self._clients.future, principal, request.id)
        return await self._answer(ctx, principal, first, wait, raise_failed=False)

    async def _call(
        self, ctx: Ctx, request: Any, kind: str, given: dict[str, Any]
    ) -> client_pb2.Future:
        wait = requests.wait_seconds(request)
        given = {**given, **requests.deadline_seconds(request)}
        principal = context.principal()
        future_id, _, _ = await asyncio.to_thread(
            self._clients.call, principal, request.id, request.seq, kind, given
        )
        first = await asyncio.to_thread(self._clients.future, principal, future_id)
        return await self._answer(ctx, principal, first, wait, raise_failed=True)

    async def _answer(
        self, ctx: Ctx, principal: Any, first: client_pb2.Future, wait: float, *, raise_failed: bool
    ) -> client_pb2.Future:
        future: client_pb2.Future = first
        if not _ended(first):
            future = await until(
                self._wakeups,
                future_topic(first.client_id, first.seq),
                lambda: asyncio.to_thread(self._clients.future, principal, first.id),
                _ended,
                wait,
            )
        if future.status == "failed" and raise_failed:
            raise error_of(future)
        if not _ended(future):
            await ctx.send_initial_metadata(((REST_STATUS, "202"),))
        return future
