"""The executor's side of training clients: the calls an engine executor applies next,
pushed on its stream in order (a create with the client's lease), its answers applied
once (metered and charged), its heartbeats and releases, its hello and goodbye, and the
sweep that loses a client whose lease lapsed.

The rows are the truth, not the stream: an operation is `queued` until an executor
stream sends it, and is sent again on the next stream until its answer is applied; the
engine answers a repeated sequence number from what it kept, so nothing runs twice."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.claims import store as claims_store
from services.claims.clients import requests, store
from services.claims.clients.service import hold_of
from services.claims.fencing import grant_output, lease_sha256
from services.core import errors, lifecycle
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.money import client_windows, windows
from services.core.states import CLIENT_LIVE, OPERATION_PENDING, ClientStatus, OperationStatus
from services.core.store import Store, utcnow
from services.core.tables import ClientRow, OperationRow
from services.core.wakeups import future_topic, mark, operations_topic
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2

log = logging.getLogger(__name__)
# How long a client outlives its executor's stream before it is lost, when the executor
# does not come back naming it (a restarted executor that does not name it loses it at
# once).
RECONNECT_SECONDS = 30
# How long an answered operation is kept for a retried call.
KEPT = dt.timedelta(hours=24)


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """An operation to push to an executor."""

    client: str
    seq: int
    kind: str
    input: dict[str, Any]
    org: str = ""
    lease: str = ""
    report: int = 0


class Engines:
    def __init__(
        self,
        db: Store,
        config: Config,
        artifacts: ArtifactClient | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._db = db
        self._config = config
        self._artifacts = artifacts
        self._now = clock
        self._policy = windows.Policy.of(config)

    @property
    def ttl(self) -> dt.timedelta:
        return dt.timedelta(seconds=self._config.lease_ttl_seconds)

    def due(self, executor_id: str, sent: set[tuple[str, int]]) -> list[Dispatch]:
        """The operations the executor applies next that this stream has not sent: each
        live client's next by sequence number. A create sent again (on a new stream) comes
        with a new lease; the old one ends."""

        def work() -> list[Dispatch]:
            now = self._now()
            out: list[Dispatch] = []
            with self._db.unit() as session:
                for client, op in store.next_operations(session, executor_id):
                    if (client.id, op.seq) in sent:
                        continue
                    if self._late(session, client, op, now):
                        continue
                    lifecycle.operation_sent(op)
                    if op.kind != "create":
                        out.append(Dispatch(client.id, op.seq, op.kind, op.input))
                        continue
                    token = "trl_" + secrets.token_urlsafe(32)
                    client.lease_sha256, client.epoch = lease_sha256(token), client.epoch + 1
                    client.lease_expires = now + self.ttl
                    out.append(
                        Dispatch(
                            client.id,
                            0,
                            "create",
                            op.input,
                            client.org,
                            token,
                            self._config.report_seconds,
                        )
                    )
            return out

        return claims_store.retry(work)

    def among(self, ids: Sequence[str]) -> set[str]:
        """Of these ids an executor names, those of training clients (the rest are tasks)."""
        if not ids:
            return set()
        with self._db.unit(write=False) as session:
            return set(session.scalars(sa.select(ClientRow.id).where(ClientRow.id.in_(ids))))

    def ended_of(self, client_ids: Sequence[str]) -> list[tuple[str, str]]:
        """Of these clients, those no longer live, with why."""
        with self._db.unit(write=False) as session:
            rows = session.scalars(sa.select(ClientRow).where(ClientRow.id.in_(client_ids))).all()
            return [(r.id, r.reason or r.status) for r in rows if r.status not in CLIENT_LIVE]

    def apply(
        self, principal: Principal, result: claim_service_pb2.OperationResult
    ) -> tuple[str, str] | None:
        """Apply an engine's answer: the operation's output (or error), the client's
        progress, the metered seconds and their charge, in one transaction. The call's
        kind and how it ended (`done`, `failed`); None for an answer applied before."""
        output: dict[str, Any] = {}
        code, message, field = result.code, result.message, result.field
        kind = self._kind(result.client, result.seq)
        if result.ok and kind in requests.OUTPUTS:
            try:
                parsed = json_format.Parse(result.output or "{}", requests.OUTPUTS[kind]())
                output = json_format.MessageToDict(parsed, preserving_proto_field_name=True)
            except json_format.ParseError:
                code, message = "INTERNAL_ERROR", "The engine answered in a shape it may not."
        if result.ok and kind == "save_weights" and not code:
            code, message = self._confirm(result.client, output)

        def work() -> tuple[str, str] | None:
            now = self._now()
            with self._db.unit() as session:
                client = self._leased(session, principal, result.client, result.lease, now)
                op = store.operation(session, client.id, result.seq)
                if op is None or op.status not in OPERATION_PENDING:
                    return None  # answered before: a resend after a reconnect
                # Its callers wait on the answer, and the client's next call may go now.
                mark(session, future_topic(client.id, op.seq), operations_topic(client.executor_id))
                op.seconds = max(result.seconds, 0.0)
                client.seq = max(client.seq, op.seq)
                store.skip_answered(session, client)
                client.update_time = now
                if not result.ok or code:
                    lifecycle.operation_failed(op, code or "INTERNAL_ERROR", message, now, field)
                    if op.kind == "create":
                        lifecycle.end_client(
                            session, client, ClientStatus.FAILED, "engine_failed", now
                        )
                    return op.kind, op.status
                lifecycle.operation_done(op, output, now)
                if op.kind == "create":
                    lifecycle.client_ready(client, now)
                    return op.kind, op.status
                if op.kind == "forward_backward":
                    client.losses = [*client.losses, [op.seq, client.step, output.get("loss", 0.0)]]
                elif op.kind == "optim_step":
                    client.step = int(output.get("step", client.step + 1))
                client.engine_seconds += op.seconds
                hold = hold_of(session, client)
                if hold is not None:
                    client.cost_micro_cents += client_windows.meter_client(
                        session, self._policy, hold, seq=op.seq, engine_seconds=op.seconds, now=now
                    )
                return op.kind, op.status

        return claims_store.retry(work)

    def _fail_late(self, session: Session, now: dt.datetime) -> None:
        """Fail every call still queued past its deadline."""
        for op in store.waiting(session):
            deadline = requests.deadline_of(op.input)
            if deadline is not None and deadline <= now:
                holder = store.client(session, op.client_id, lock=True)
                if holder is not None:
                    self._late(session, holder, op, now)

    def _late(
        self, session: Session, client: ClientRow, op: OperationRow, now: dt.datetime
    ) -> bool:
        """Fail a call still queued past its deadline, plainly and for good: its callers
        wake to `DEADLINE_EXCEEDED`, the engine never sees it, and the client's next
        call goes when its turn comes. Whether it was late."""
        deadline = requests.deadline_of(op.input)
        if deadline is None or deadline > now or op.status != OperationStatus.QUEUED:
            return False
        lifecycle.operation_failed(op, "DEADLINE_EXCEEDED", requests.DEADLINE_MESSAGE, now)
        store.skip_answered(session, client)
        mark(session, future_topic(client.id, op.seq), operations_topic(client.executor_id))
        return True

    def _kind(self, client_id: str, seq: int) -> str:
        with self._db.unit(write=False) as session:
            op = store.operation(session, client_id, seq)
            return op.kind if op is not None else ""

    def _confirm(self, client_id: str, output: dict[str, Any]) -> tuple[str, str]:
        """Read a saved adapter back before its call is answered done."""
        with self._db.unit(write=False) as session:
            row = store.client(session, client_id)
            org = row.org if row is not None else ""
        if self._artifacts is None or not org:
            return "UNAVAILABLE", "The object store cannot be reached."
        try:
            self._artifacts.confirm(org, client_id, str(output.get("sha256", "")))
        except errors.DomainError as exc:
            return exc.reason, exc.message
        return "", ""

    def _leased(
        self, session: Session, principal: Principal, client_id: str, token: str, now: dt.datetime
    ) -> ClientRow:
        """The client an executor acts on under its lease, renewed; LEASE_LOST otherwise."""
        client = store.client(session, client_id, lock=True)
        if client is None or not (client.org == principal.org or principal.runs_platform_tasks):
            raise errors.NotFound()
        if (
            client.status not in CLIENT_LIVE
            or not token
            or not secrets.compare_digest(client.lease_sha256, lease_sha256(token))
        ):
            raise errors.DomainError(
                "The lease is not the client's current one; free the client.",
                reason="LEASE_LOST",
                code=errors.Conflict.code,
            )
        client.lease_expires = now + self.ttl
        return client

    def renew(
        self, principal: Principal, client_id: str, token: str
    ) -> claim_service_pb2.ReportTaskResponse:
        """A heartbeat on a client: its lease renewed; the engine-seconds held for it."""

        def work() -> claim_service_pb2.ReportTaskResponse:
            now = self._now()
            with self._db.unit() as session:
                client = self._leased(session, principal, client_id, token, now)
                hold = hold_of(session, client)
                held = hold.held_seconds - hold.used_seconds if hold is not None else 0
                return claim_service_pb2.ReportTaskResponse(
                    held=max(held, 0), status=client.status, seq=max(client.seq, 0)
                )

        return claims_store.retry(work)

    def release(self, principal: Principal, client_id: str, token: str, reason: str) -> None:
        """The engine ended: the client goes with it."""

        def work() -> None:
            now = self._now()
            with self._db.unit() as session:
                client = self._leased(session, principal, client_id, token, now)
                lifecycle.end_client(session, client, ClientStatus.FAILED, "engine_failed", now)
                log.warning("client %s: its engine ended (%s)", client_id, reason[:32])

        claims_store.retry(work)

    def disown(self, executor_id: str, client_id: str) -> None:
        """The executor the client is placed on was sent a call for it and holds no engine
        for it: the client is lost at once, its callers answered, not left waiting on a
        lease to lapse. Said of a client placed elsewhere, or ended, it changes nothing."""

        def work() -> None:
            now = self._now()
            with self._db.unit() as session:
                client = store.client(session, client_id, lock=True)
                if client is None or client.executor_id != executor_id:
                    return
                if lifecycle.end_client(session, client, ClientStatus.LOST, "executor_lost", now):
                    log.warning("client %s: its executor holds no engine for it", client_id)

        claims_store.retry(work)

    def resume(
        self, principal: Principal, executor_id: str, machine: str, named: Sequence[tuple[str, str]]
    ) -> tuple[list[str], list[str]]:
        """A hello: the clients it names under their current leases move to the new
        stream; the others this machine held before are lost at once (a restarted
        executor holds nothing)."""

        def work() -> tuple[list[str], list[str]]:
            now = self._now()
            resumed, lost = [], []
            tokens = dict(named)
            with self._db.unit() as session:
                before = session.scalars(
                    sa.select(claims_store.ExecutorRow.id).where(
                        claims_store.ExecutorRow.key_id == principal.key_id,
                        claims_store.ExecutorRow.machine == machine,
                        claims_store.ExecutorRow.id != executor_id,
                    )
                ).all()
                held = {c.id: c for c in store.live_on(session, [*before, executor_id])}
                for client_id in tokens.keys() - held.keys():
                    lost.append(client_id)
                for client in held.values():
                    token = tokens.get(client.id, "")
                    if token and secrets.compare_digest(client.lease_sha256, lease_sha256(token)):
                        client.executor_id, client.lease_expires = executor_id, now + self.ttl
                        resumed.append(client.id)
                    else:
                        lifecycle.end_client(
                            session, client, ClientStatus.LOST, "executor_lost", now
                        )
                        if client.id in tokens:
                            lost.append(client.id)
            return resumed, lost

        return claims_store.retry(work)

    def goodbye(self, executor_id: str) -> None:
        """The executor's stream ended: its clients are lost unless it comes back soon."""
        now = self._now()
        soon = now + min(self.ttl, dt.timedelta(seconds=RECONNECT_SECONDS))
        with self._db.unit() as session:
            for client in store.live_on(session, [executor_id]):
                if client.lease_expires is None or client.lease_expires > soon:
                    client.lease_expires = soon

    def expire(self) -> int:
        """Lose every client whose lease lapsed, fail every call queued past its deadline,
        and forget answered calls past keeping."""

        def work() -> int:
            now = self._now()
            with self._db.unit() as session:
                lapsed = store.lapsed(session, now)
                for client in lapsed:
                    lifecycle.end_client(session, client, ClientStatus.LOST, "executor_lost", now)
                self._fail_late(session, now)
                session.execute(
                    sa.delete(OperationRow).where(
                        OperationRow.status.in_((OperationStatus.DONE, OperationStatus.FAILED)),
                        OperationRow.done_time < now - KEPT,
                        OperationRow.kind != "create",
                    )
                )
                return len(lapsed)

        return claims_store.retry(work)

    def read_input(
        self, principal: Principal, request: claim_service_pb2.ReadTaskInputRequest
    ) -> artifact_pb2.Artifact:
        """Where to download what a client reads under its lease: the adapter or state its
        `from` names; NOT_FOUND for any other object."""

        def work() -> tuple[str, str]:
            with self._db.unit() as session:
                client = self._leased(session, principal, request.task, request.lease, self._now())
                create = store.operation(session, client.id, 0)
                origin = str(((create.input if create is not None else None) or {}).get("from", ""))
                return client.org, origin

        org, origin = claims_store.retry(work)
        if not origin or request.sha256 != origin:
            raise errors.NotFound()
        if self._artifacts is None:
            raise errors.Unavailable()
        return self._artifacts.describe(org, request.sha256)

    def grant(
        self, principal: Principal, request: claim_service_pb2.RegisterTaskArtifactRequest
    ) -> artifact_pb2.Grant:
        """An upload grant for a client's saved adapter, under its lease."""

        def work() -> str:
            with self._db.unit() as session:
                return self._leased(
                    session, principal, request.task, request.lease, self._now()
                ).org

        org = claims_store.retry(work)
        if request.kind != "lora":
            raise errors.ValidationError("kind", "must be lora", metadata={"supported": "lora"})
        return grant_output(self._artifacts, org, request.task, request)
