"""ClientService's use cases on the caller's side: a client placed on an engine executor
under a lease, calls stored by `(client, seq)` (the same pair again answers the first
call's future), reads, and a delete. What the engine executor sends back is `engines.py`'s;
no grpc here."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.claims import store as claims_store
from services.claims.clients import requests, store, view
from services.claims.clients.store import ClientRow, OperationRow
from services.core import adapters, audit, errors, ids, lifecycle
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.money import client_windows, windows
from services.core.money.tables import HoldRow
from services.core.states import CLIENT_GONE, CLIENT_LIVE, ClientStatus, OperationStatus
from services.core.store import Store, utcnow
from services.core.wakeups import mark, operations_topic
from trainyard.client.v1 import client_pb2, client_service_pb2
from trainyard.training.catalog import Catalog

log = logging.getLogger(__name__)


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def gone(reason: str) -> errors.DomainError:
    return errors.FailedPrecondition(
        CLIENT_GONE.get(reason, CLIENT_GONE["executor_lost"]), reason="CLIENT_GONE"
    )


class Clients:
    def __init__(
        self,
        db: Store,
        config: Config,
        catalog: Catalog,
        clock: Callable[[], dt.datetime] = utcnow,
        artifacts: ArtifactClient | None = None,
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
        origin = requests.origin_of(request)
        adapter = (
            adapters.read(self._db, self._artifacts, principal.org, origin) if origin else None
        )
        if adapter is not None and request.with_optimizer and not adapter.optimizer:
            raise errors.ValidationError(
                "with_optimizer", "needs a saved state that holds the optimizer's"
            )
        base, adaptation, seed = requests.adaptation_of(request, self._catalog, adapter)
        principal.check_base(base.name)  # a key limited to bases trains only those
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
                client_windows.open_client_hold(
                    session,
                    self._policy,
                    org=principal.org,
                    client_id=client_id,
                    charged=charged,
                    now=now,
                )
                session.add(
                    ClientRow(
                        id=client_id,
                        org=principal.org,
                        base_model=base.name,
                        adaptation=ad,
                        protect=protect,
                        seed=seed,
                        status=ClientStatus.PLACING,
                        executor_id=engine.id,
                        charged=charged,
                        lease_expires=now + self.ttl,
                        seq=-1,
                        step=0,
                        losses=[],
                        engine_seconds=0.0,
                        cost_micro_cents=0,
                        reason="",
                        message="",
                        create_time=now,
                        update_time=now,
                    )
                )
                create: dict[str, Any] = {"base_model": base.name, "adaptation": ad, "seed": seed}
                if origin:
                    create.update({"from": origin, "with_optimizer": request.with_optimizer})
                session.add(_operation(client_id, 0, "create", create, now))
                mark(session, operations_topic(engine.id))
                audit.record(
                    session,
                    "training.client.created",
                    org=principal.org,
                    subject=client_id,
                    actor=principal.key_id,
                    executor=engine.id,
                    base=base.name,
                )
                return client_id, engine.id

        return claims_store.retry(work)

    def _engine(self, session: Session, org: str, base: str) -> claims_store.ExecutorRow:
        """The connected engine with the most room that may hold the org's client, locked
        so two creates count its clients one after the other."""
        rows = session.scalars(
            sa.select(claims_store.ExecutorRow).where(claims_store.ExecutorRow.connected.is_(True))
        ).all()
        engines = [
            e
            for e in rows
            if int(e.offer.get("clients", 0)) > 0
            and (e.platform or e.org == org)
            and base in e.offer.get("bases", ())
        ]
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
                if client.status not in CLIENT_LIVE:
                    raise gone(client.reason or client.status)
                if number <= client.seq:
                    raise errors.ValidationError("seq", "is at or below the client's last call")
                if number > store.last_seq(session, client.id) + 1024:
                    raise errors.ValidationError("seq", "is too far past the client's last call")
                client_windows.client_refusal(hold_of(session, client))
                op = _operation(
                    client.id, number, kind, requests.with_deadline(given, now), now, digest
                )
                session.add(op)
                mark(session, operations_topic(client.executor_id))
                return op.id, number, client.executor_id

        return claims_store.retry(work)

    def future(self, principal: Principal, future_id: str) -> client_pb2.Future:
        """The org's call's future; a create's is not one a caller reads."""
        with self._db.unit(write=False) as session:
            op = store.future(session, future_id)
            client = store.owned(session, principal.org, op.client_id) if op else None
            if op is None or client is None or op.kind == "create":
                raise errors.NotFound()
            return view.future_proto(session, op)

    def created(
        self, principal: Principal, client_id: str
    ) -> tuple[client_pb2.TrainingClient, bool]:
        """The org's client, and whether its create has been answered."""
        with self._db.unit(write=False) as session:
            row = store.owned(session, principal.org, client_id)
            if row is None:
                raise errors.NotFound()
            return view.client_proto(row, session), row.status != ClientStatus.PLACING

    def client(self, principal: Principal, client_id: str) -> client_pb2.TrainingClient:
        with self._db.unit(write=False) as session:
            row = store.owned(session, principal.org, client_id)
            if row is None:
                raise errors.NotFound()
            return view.client_proto(row, session)

    def page(
        self, principal: Principal, status: str, offset: int, size: int
    ) -> tuple[list[client_pb2.TrainingClient], int]:
        with self._db.unit(write=False) as session:
            rows, total = store.page(session, principal.org, status, offset, size)
            found = view.creates(session, [r.id for r in rows])
            return [view.client_proto(r, session, found.get(r.id, {})) for r in rows], total

    def delete(self, principal: Principal, client_id: str) -> client_pb2.TrainingClient:
        """Drop the org's client: its engine is told to free it, its calls not answered
        fail, its hold goes back. Deleting it again answers the same."""

        def work() -> client_pb2.TrainingClient:
            with self._db.unit() as session:
                row = store.owned(session, principal.org, client_id, lock=True)
                if row is None:
                    raise errors.NotFound()
                if row.status in CLIENT_LIVE:
                    lifecycle.end_client(session, row, ClientStatus.DELETED, "deleted", self._now())
                    audit.record(
                        session,
                        "training.client.deleted",
                        org=row.org,
                        subject=row.id,
                        actor=principal.key_id,
                    )
                return view.client_proto(row, session)

        return claims_store.retry(work)


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
        id=ids.new_id("fut"),
        client_id=client_id,
        seq=seq,
        kind=kind,
        input=given,
        input_sha256=digest or _sha({"kind": kind, "input": given}),
        status=OperationStatus.QUEUED,
        seconds=0.0,
        create_time=now,
    )


def hold_of(session: Session, client: ClientRow) -> HoldRow | None:
    return windows.hold_of(session, client.id, 1)
