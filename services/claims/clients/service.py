"""ClientService's use cases: a client placed on an engine executor under a lease, calls
stored by `(client, seq)` and handed to the engine in order, the engine's answers
applied (metered and charged once), and a client that its engine no longer holds moved
out of the org's live ones. No grpc here; the servicer and the executor stream call these.

The rows are the truth, not the stream: an operation is `queued` until an executor
stream sends it, and is sent again on the next stream until its answer is applied; the
engine answers a repeated sequence number from what it kept, so nothing runs twice."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.claims import store as claims_store
from services.claims.clients import requests, store
from services.claims.clients.store import ClientRow, OperationRow
from services.claims.leases import lease_sha256
from services.core import audit, errors, ids, view
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.money import windows
from services.core.money.tables import HoldRow
from services.core.store import Store, utcnow
from trainyard.artifact.v1 import artifact_pb2, artifact_service_pb2
from trainyard.claim.v1 import claim_service_pb2
from trainyard.client.v1 import client_pb2, client_service_pb2
from trainyard.training.catalog import Catalog

log = logging.getLogger(__name__)
# How long a client outlives its executor's stream before it is lost, when the executor
# does not come back naming it (a restarted executor that does not name it loses it at
# once).
RECONNECT_SECONDS = 30
# How long an answered operation is kept for a retried call.
KEPT = dt.timedelta(hours=24)
GONE_MESSAGES = {
    "executor_lost": "The executor holding the client went away; create another client.",
    "engine_failed": "The engine could not hold the client; create another client.",
    "deleted": "The client was deleted.",
}


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


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def gone(reason: str) -> errors.DomainError:
    return errors.FailedPrecondition(
        GONE_MESSAGES.get(reason, GONE_MESSAGES["executor_lost"]), reason="CLIENT_GONE"
    )


class Clients:
    def __init__(
        self,
        db: Store,
        config: Config,
        catalog: Catalog,
        artifacts: ArtifactClient | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._db = db
        self._config = config
        self._catalog = catalog
        self._artifacts = artifacts
        self._now = clock
        self._policy = windows.Policy.of(config)

    @property
    def ttl(self) -> dt.timedelta:
        return dt.timedelta(seconds=self._config.lease_ttl_seconds)

    # -- create ----------------------------------------------------------------------------

    def create(
        self, principal: Principal, request: client_service_pb2.CreateTrainingClientRequest
    ) -> tuple[str, str]:
        """Place a new client on an engine executor; its id and its executor's."""
        base, adaptation, seed = requests.adaptation_of(request, self._catalog)
        ad = json_format.MessageToDict(adaptation, preserving_proto_field_name=True)
        protect = json_format.MessageToDict(request.protect, preserving_proto_field_name=True)

        def work() -> tuple[str, str]:
            now = self._now()
            with self._db.unit() as session:
                if store.live_count(session, org=principal.org) >= self._config.train_clients:
                    raise _full("TRAIN_CLIENTS", self._config.train_clients)
                engine = self._engine(session, principal.org, base.name)
                client_id = ids.new_id("cli")
                charged = engine.platform
                windows.open_client_hold(
                    session, self._policy, org=principal.org, client_id=client_id,
                    charged=charged, now=now,
                )  # fmt: skip
                session.add(
                    ClientRow(
                        id=client_id, org=principal.org, base_model=base.name, adaptation=ad,
                        protect=protect, seed=seed, status="placing", executor_id=engine.id,
                        charged=charged, lease_expires=now + self.ttl, seq=-1, step=0, losses=[],
                        engine_seconds=0.0, cost_micro_cents=0, reason="", message="",
                        create_time=now, update_time=now,
                    )
                )  # fmt: skip
                create = {"base_model": base.name, "adaptation": ad, "seed": seed}
                session.add(_operation(client_id, 0, "create", create, now))
                audit.record(
                    session, "training.client.created", org=principal.org, subject=client_id,
                    actor=principal.key_id, executor=engine.id, base=base.name,
                )  # fmt: skip
                return client_id, engine.id

        return claims_store.retry(work)

    def _engine(self, session: Session, org: str, base: str) -> claims_store.ExecutorRow:
        """The connected engine with the most room that may hold the org's client, locked
        so two creates count its clients one after the other."""
        rows = session.scalars(
            sa.select(claims_store.ExecutorRow).where(claims_store.ExecutorRow.connected.is_(True))
        ).all()
        engines = [
            e for e in rows
            if int(e.offer.get("clients", 0)) > 0 and (e.platform or e.org == org)
            and base in e.offer.get("bases", ())
        ]  # fmt: skip
        if not engines:
            raise errors.Unavailable(
                "No connected executor serves training clients of this base.",
                reason="TRAINING_UNAVAILABLE",
            )
        counts = store.live_counts(session, [e.id for e in engines])
        room = [
            (counts.get(e.id, 0), e.id)
            for e in engines
            if counts.get(e.id, 0) < min(int(e.offer["clients"]), self._config.train_engine_clients)
        ]
        if not room:
            raise _full("TRAIN_ENGINE_CLIENTS", self._config.train_engine_clients)
        chosen = session.get(claims_store.ExecutorRow, min(room)[1], with_for_update=True)
        assert chosen is not None
        if store.live_count(session, executor_id=chosen.id) >= self._config.train_engine_clients:
            raise _full("TRAIN_ENGINE_CLIENTS", self._config.train_engine_clients)
        return chosen

    # -- calls -----------------------------------------------------------------------------

    def call(
        self, principal: Principal, client_id: str, seq: int, kind: str, given: dict[str, Any]
    ) -> tuple[str, int, str]:
        """Store a call on the org's client under its sequence number (the next when 0):
        the future's id, the number, and the executor holding the client. The same
        `(client, seq)` again answers the first call's future."""
        requests.check_seq(seq)
        digest = _sha({"kind": kind, "input": given})

        def work() -> tuple[str, int, str]:
            now = self._now()
            with self._db.unit() as session:
                client = store.owned(session, principal.org, client_id, lock=True)
                if client is None:
                    raise errors.NotFound()
                number = seq or store.last_seq(session, client.id) + 1
                found = store.operation(session, client.id, number)
                if found is not None:
                    if found.input_sha256 != digest:
                        raise errors.AlreadyExists(
                            "The sequence number was used before with another call.",
                            reason="IDEMPOTENCY_KEY_REUSED",
                        )
                    return found.id, number, client.executor_id
                if client.status not in store.LIVE:
                    raise gone(client.reason or client.status)
                if number <= client.seq:
                    raise errors.ValidationError("seq", "is at or below the client's last call")
                if number > store.last_seq(session, client.id) + 1024:
                    raise errors.ValidationError("seq", "is too far past the client's last call")
                windows.client_refusal(_hold(session, client))
                op = _operation(client.id, number, kind, given, now, digest)
                session.add(op)
                return op.id, number, client.executor_id

        return claims_store.retry(work)

    def future(self, principal: Principal, future_id: str) -> client_pb2.Future:
        """The org's call's future; a create's is not one a caller reads."""
        with self._db.unit(write=False) as session:
            op = store.future(session, future_id)
            client = store.owned(session, principal.org, op.client_id) if op else None
            if op is None or client is None or op.kind == "create":
                raise errors.NotFound()
            return _future(session, op)

    def created(
        self, principal: Principal, client_id: str
    ) -> tuple[client_pb2.TrainingClient, bool]:
        """The org's client, and whether its create has been answered."""
        with self._db.unit(write=False) as session:
            row = store.owned(session, principal.org, client_id)
            if row is None:
                raise errors.NotFound()
            return _client(row), row.status != "placing"

    def client(self, principal: Principal, client_id: str) -> client_pb2.TrainingClient:
        with self._db.unit(write=False) as session:
            row = store.owned(session, principal.org, client_id)
            if row is None:
                raise errors.NotFound()
            return _client(row)

    def page(
        self, principal: Principal, status: str, offset: int, size: int
    ) -> tuple[list[client_pb2.TrainingClient], int]:
        with self._db.unit(write=False) as session:
            rows, total = store.page(session, principal.org, status, offset, size)
            return [_client(r) for r in rows], total

    def delete(self, principal: Principal, client_id: str) -> client_pb2.TrainingClient:
        """Drop the org's client: its engine is told to free it, its calls not answered
        fail, its hold goes back. Deleting it again answers the same."""

        def work() -> client_pb2.TrainingClient:
            with self._db.unit() as session:
                row = store.owned(session, principal.org, client_id, lock=True)
                if row is None:
                    raise errors.NotFound()
                if row.status in store.LIVE:
                    self._end(session, row, "deleted", "deleted")
                    audit.record(
                        session, "training.client.deleted", org=row.org, subject=row.id,
                        actor=principal.key_id,
                    )  # fmt: skip
                return _client(row)

        return claims_store.retry(work)

    def _end(self, session: Session, row: ClientRow, status: str, reason: str) -> None:
        now = self._now()
        row.status, row.update_time = status, now
        row.reason = "" if status == "deleted" else reason
        row.message = "" if status == "deleted" else GONE_MESSAGES.get(reason, "")
        row.lease_expires = None
        for op in store.pending(session, row.id):
            _fail(op, "CLIENT_GONE", GONE_MESSAGES.get(reason, ""), now)
        windows.release(session, task_id=row.id, now=now)

    # -- the executor's side ---------------------------------------------------------------

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
                    if op.status == "queued":
                        op.status = "sent"
                    if op.kind != "create":
                        out.append(Dispatch(client.id, op.seq, op.kind, op.input))
                        continue
                    token = "trl_" + secrets.token_urlsafe(32)
                    client.lease_sha256, client.epoch = lease_sha256(token), client.epoch + 1
                    client.lease_expires = now + self.ttl
                    out.append(
                        Dispatch(
                            client.id, 0, "create", op.input, client.org, token,
                            self._config.report_seconds,
                        )
                    )  # fmt: skip
            return out

        return claims_store.retry(work)

    def ended_of(self, client_ids: Sequence[str]) -> list[tuple[str, str]]:
        """Of these clients, those no longer live, with why."""
        with self._db.unit(write=False) as session:
            rows = session.scalars(sa.select(ClientRow).where(ClientRow.id.in_(client_ids))).all()
            return [(r.id, r.reason or r.status) for r in rows if r.status not in store.LIVE]

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
                if op is None or op.status not in store.PENDING:
                    return None  # answered before: a resend after a reconnect
                op.seconds = max(result.seconds, 0.0)
                client.seq = max(client.seq, op.seq)
                client.update_time = now
                if not result.ok or code:
                    _fail(op, code or "INTERNAL_ERROR", message, now, field)
                    if op.kind == "create":
                        self._end(session, client, "failed", "engine_failed")
                    return op.kind, op.status
                op.status, op.output, op.done_time = "done", output, now
                if op.kind == "create":
                    client.status = "ready"
                    return op.kind, op.status
                if op.kind == "forward_backward":
                    client.losses = [*client.losses, [op.seq, client.step, output.get("loss", 0.0)]]
                elif op.kind == "optim_step":
                    client.step = int(output.get("step", client.step + 1))
                client.engine_seconds += op.seconds
                hold = _hold(session, client)
                if hold is not None:
                    client.cost_micro_cents += windows.meter_client(
                        session, self._policy, hold, seq=op.seq, engine_seconds=op.seconds, now=now
                    )
                return op.kind, op.status

        return claims_store.retry(work)

    def _kind(self, client_id: str, seq: int) -> str:
        with self._db.unit(write=False) as session:
            op = store.operation(session, client_id, seq) if ids.is_id(client_id, "cli") else None
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
        if client is None or not (client.org == principal.org or principal.is_platform):
            raise errors.NotFound()
        if (
            client.status not in store.LIVE
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
                hold = _hold(session, client)
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
                self._end(session, client, "failed", "engine_failed")
                log.warning("client %s: its engine ended (%s)", client_id, reason[:32])

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
                        self._end(session, client, "lost", "executor_lost")
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
        """Lose every client whose lease lapsed, and forget answered calls past keeping."""

        def work() -> int:
            now = self._now()
            with self._db.unit() as session:
                lapsed = store.lapsed(session, now)
                for client in lapsed:
                    self._end(session, client, "lost", "executor_lost")
                session.execute(
                    sa.delete(OperationRow).where(
                        OperationRow.status.in_(("done", "failed")),
                        OperationRow.done_time < now - KEPT,
                        OperationRow.kind != "create",
                    )
                )
                return len(lapsed)

        return claims_store.retry(work)

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
        if self._artifacts is None:
            raise errors.Unavailable()
        return self._artifacts.grant(
            org,
            artifact_service_pb2.GrantJobArtifactRequest(
                job_id=request.task, task_id=request.task, kind=request.kind, name=request.name,
                sha256=request.sha256, size=request.size, meta=dict(request.meta),
            ),
        )  # fmt: skip


# -- rows and views --------------------------------------------------------------------------


def _full(limit: str, value: int) -> errors.DomainError:
    return errors.Unavailable(
        "The engine holds its most training clients; delete one or try later.",
        reason="ENGINE_FULL",
        metadata={"limit": limit, "value": str(value)},
    )


def _operation(
    client_id: str, seq: int, kind: str, given: dict[str, Any], now: dt.datetime, digest: str = ""
) -> OperationRow:
    return OperationRow(
        id=ids.new_id("fut"), client_id=client_id, seq=seq, kind=kind, input=given,
        input_sha256=digest or _sha({"kind": kind, "input": given}), status="queued",
        seconds=0.0, create_time=now,
    )  # fmt: skip


def _fail(op: OperationRow, code: str, message: str, now: dt.datetime, field: str = "") -> None:
    code = code if code in errors.REASONS else "INTERNAL_ERROR"
    op.status, op.done_time = "failed", now
    op.error = {"code": code, "message": message[:256], "field": field[:128]}


def _hold(session: Session, client: ClientRow) -> HoldRow | None:
    return windows.hold_of(session, client.id, 1)


def _client(row: ClientRow) -> client_pb2.TrainingClient:
    out = client_pb2.TrainingClient(
        id=row.id, base_model=row.base_model, status=row.status, reason=row.reason,
        message=row.message, step=row.step, seq=max(row.seq, 0),
        engine_seconds=row.engine_seconds, cost_micro_cents=row.cost_micro_cents,
        create_time=view.ts(row.create_time), update_time=view.ts(row.update_time),
    )  # fmt: skip
    json_format.ParseDict(row.adaptation, out.adaptation, ignore_unknown_fields=True)
    json_format.ParseDict(row.protect or {}, out.protect, ignore_unknown_fields=True)
    for seq, step, loss in row.losses:
        out.loss_history.add(seq=int(seq), step=int(step), loss=float(loss))
    return out


def _future(session: Session, op: OperationRow) -> client_pb2.Future:
    status = op.status if op.status in ("done", "failed", "queued") else "running"
    out = client_pb2.Future(
        id=op.id, client_id=op.client_id, seq=op.seq, kind=op.kind, status=status,
        engine_seconds=op.seconds, create_time=view.ts(op.create_time),
    )  # fmt: skip
    if op.status in store.PENDING:
        out.queue_position = store.ahead(session, op)
        if op.status == "sent" and out.queue_position == 0:
            out.status = "running"
        elif op.status == "sent":
            out.status = "queued"
    elif op.status == "done" and op.kind in requests.OUTPUTS:
        json_format.ParseDict(op.output or {}, getattr(out, op.kind), ignore_unknown_fields=True)
    elif op.error:
        json_format.ParseDict(op.error, out.error, ignore_unknown_fields=True)
    return out


def error_of(future: client_pb2.Future) -> errors.DomainError:
    """A failed call's error, raised to a caller that waited for it in-line."""
    err = future.error
    if err.field and err.code == "VALIDATION_ERROR":
        return errors.ValidationError(err.field, "is not valid for the client's model")
    return errors.DomainError(
        err.message or "The call failed.",
        reason=err.code or "INTERNAL_ERROR",
        code=_CODES.get(err.code, errors.FailedPrecondition.code),
    )


_CODES = {
    "VALIDATION_ERROR": errors.ValidationError.code,
    "CLIENT_GONE": errors.FailedPrecondition.code,
    "INTERNAL_ERROR": errors.Unavailable.code,
    "UNAVAILABLE": errors.Unavailable.code,
}
