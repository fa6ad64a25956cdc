"""The training clients one executor's stream serves: each held client's next call pushed
in order as it comes, the engine's answers applied, and a cancel for a client that was
deleted or lost. The stream (`stream.ExecutorStream`) owns the connection and hands this
side what concerns a client."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from services.claims.service import ClaimService
from services.core import errors
from services.core.auth import Principal
from services.core.wakeups import operations_topic, woken
from trainyard.claim.v1 import claim_service_pb2

log = logging.getLogger(__name__)
# How often a stream holding clients checks whether one was deleted or lost.
CLIENT_CHECK_SECONDS = 1.0


class ClientOperator:
    """The clients side of one executor's stream, writing to the stream's queue `out`."""

    def __init__(
        self,
        service: ClaimService,
        principal: Principal,
        executor_id: str,
        out: asyncio.Queue[claim_service_pb2.ConnectResponse | None],
        held: set[str],
        clients: set[str],
    ) -> None:
        """`held`: the tasks and clients the executor goes on with; `clients`: the ids of
        those (and of any it named) that are training clients."""
        self._service, self._principal, self._executor_id = service, principal, executor_id
        self._out = out
        # The clients served now, and the operations sent that are not answered.
        # `_served` keeps every client ever served here: what the executor sends about
        # one, even after it ended here, goes to the clients' side.
        self._clients = held & clients
        self._served = set(clients)
        self._sent: set[tuple[str, int]] = set()

    def serves(self, task_id: str) -> bool:
        """Whether `task_id` names a client this stream served (else it is a task)."""
        return task_id in self._served

    def released(self, client_id: str) -> None:
        """The executor gave the client back: no cancel is sent for it any more."""
        self._clients.discard(client_id)

    async def result(self, result: claim_service_pb2.OperationResult) -> None:
        """Apply an engine's answer: its commit wakes whoever waits on it, and this
        operator, which sends the client's next call. The call counts as sent until its
        answer is committed: a pass meanwhile would read it still pending and send it
        again (a create again with a new lease, which the answer in flight then lacks)."""
        try:
            applied = await asyncio.to_thread(self._service.engines.apply, self._principal, result)
        except errors.DomainError as exc:
            if exc.reason in ("LEASE_LOST", "NOT_FOUND"):
                self._clients.discard(result.client)
                cancel = claim_service_pb2.Cancel(task=result.client, reason="lease_lost")
                await self._out.put(claim_service_pb2.ConnectResponse(cancel=cancel))
            return
        finally:
            self._sent.discard((result.client, result.seq))
        if applied is not None:
            kind, outcome = applied
            self._service.metrics.client_operations.labels(kind, outcome).inc()
            if outcome == "done" and kind != "create":
                self._service.metrics.engine_seconds.inc(max(result.seconds, 0.0))
        else:  # answered before (a resend): its commit woke no one, the next call may go
            self._service.wakeups.deliver([operations_topic(self._executor_id)])

    async def run(self) -> None:
        """Push each held client's next call as it comes (woken by the call, else a
        poll), and tell the executor to free a client that was deleted or lost."""
        with self._service.wakeups.watching(operations_topic(self._executor_id)) as wake:
            await self._run_while(wake)

    async def _run_while(self, wake: asyncio.Event) -> None:
        engines = self._service.engines
        next_check = 0.0
        while True:
            wake.clear()
            try:
                for op in await asyncio.to_thread(engines.due, self._executor_id, set(self._sent)):
                    self._sent.add((op.client, op.seq))
                    self._clients.add(op.client)
                    self._served.add(op.client)
                    message = claim_service_pb2.ClientOperation(
                        client=op.client,
                        seq=op.seq,
                        kind=op.kind,
                        input=json.dumps(op.input),
                        lease=op.lease,
                        org=op.org,
                        report=op.report,
                    )
                    await self._out.put(claim_service_pb2.ConnectResponse(operation=message))
                if self._clients and time.monotonic() >= next_check:
                    next_check = time.monotonic() + CLIENT_CHECK_SECONDS
                    for client_id, reason in await asyncio.to_thread(
                        engines.ended_of, sorted(self._clients)
                    ):
                        self._clients.discard(client_id)
                        cancel = claim_service_pb2.Cancel(task=client_id, reason=reason)
                        await self._out.put(claim_service_pb2.ConnectResponse(cancel=cancel))
            except errors.DomainError as exc:
                log.warning("client operations refused: %s", exc.reason)
            except Exception:
                log.exception("client operations pass failed")
            await woken(wake, CLIENT_CHECK_SECONDS)
