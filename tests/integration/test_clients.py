"""Training clients' rows on SQLite and PostgreSQL: placement on a connected engine, the
order calls reach it in, a `(client, seq)` kept once, an answer applied once and charged
once, and a restarted executor that no longer names its client losing it at once."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

from services.claims.offers import Offer
from services.claims.service import ClaimService
from services.core import errors
from services.core.auth import Principal
from services.core.config import Config
from services.core.store import Store
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.client.v1 import client_service_pb2

OPERATOR = Principal(key_id="key_op", org="acme", role="operator")
MEMBER = Principal(key_id="key_member", org="acme", role="member")
PLATFORM = Principal(key_id="key_platform", org="platform", role="platform")
SUPPORTS = task_pb2.Supports(adaptations=["lora"], outputs=["lora"])
FB = {"data": [{"model_input": {"text": "hello"}}]}


@pytest.fixture
def claims(config: Config, store: Store) -> ClaimService:
    return ClaimService(store, config)


def engine(claims: ClaimService, clients: int = 2) -> tuple[str, Offer]:
    offer = Offer.parse("local", True, ["fixture-tiny-llm"], ["cpu"], SUPPORTS, clients)
    executor_id, _, _ = claims.hello(PLATFORM, offer, [])
    return executor_id, offer


def create(claims: ClaimService) -> str:
    request = client_service_pb2.CreateTrainingClientRequest(base_model="fixture-tiny-llm")
    client_id, _ = claims.clients.create(OPERATOR, request)
    return client_id


def answer(claims: ClaimService, client: str, lease: str, seq: int, output: dict) -> None:  # type: ignore[type-arg]
    result = claim_service_pb2.OperationResult(
        client=client, lease=lease, seq=seq, ok=True, output=json.dumps(output), seconds=2.0
    )
    claims.engines.apply(PLATFORM, result)


def test_no_engine_is_training_unavailable_and_the_limits_are_engine_full(
    claims: ClaimService,
) -> None:
    with pytest.raises(errors.DomainError) as caught:
        create(claims)
    assert caught.value.reason == "TRAINING_UNAVAILABLE"
    engine(claims)
    create(claims)
    create(claims)
    with pytest.raises(errors.DomainError) as caught:
        create(claims)
    assert caught.value.reason == "ENGINE_FULL"


def test_the_org_limit_and_the_engine_limit_each_name_themselves(
    config: Config, store: Store
) -> None:
    claims = ClaimService(store, dataclasses.replace(config, train_clients=1))
    engine(claims)
    create(claims)
    with pytest.raises(errors.DomainError) as caught:
        create(claims)
    assert (caught.value.reason, caught.value.metadata["limit"]) == ("ENGINE_FULL", "TRAIN_CLIENTS")
    # Another org still finds room on the engine, until the engine holds its two.
    other = Principal(key_id="key_op2", org="globex", role="operator")
    request = client_service_pb2.CreateTrainingClientRequest(base_model="fixture-tiny-llm")
    claims.clients.create(other, request)
    third = Principal(key_id="key_op3", org="initech", role="operator")
    with pytest.raises(errors.DomainError) as caught:
        claims.clients.create(third, request)
    assert caught.value.metadata["limit"] == "TRAIN_ENGINE_CLIENTS"


def test_calls_reach_the_engine_in_order_once_and_are_charged_once(
    claims: ClaimService,
) -> None:
    executor_id, _ = engine(claims)
    client = create(claims)
    # Calls may come before the engine loaded the client: they wait their turn.
    first, seq, _ = claims.clients.call(MEMBER, client, 0, "forward_backward", FB)
    assert seq == 1
    assert claims.clients.call(MEMBER, client, 1, "forward_backward", FB)[0] == first
    with pytest.raises(errors.DomainError) as caught:
        claims.clients.call(MEMBER, client, 1, "optim_step", {})
    assert caught.value.reason == "IDEMPOTENCY_KEY_REUSED"
    sent: set[tuple[str, int]] = set()
    [create_op] = claims.engines.due(executor_id, sent)
    assert (create_op.kind, create_op.seq) == ("create", 0) and create_op.lease
    sent.add((client, 0))
    assert claims.engines.due(executor_id, sent) == []
    answer(claims, client, create_op.lease, 0, {})
    [call] = claims.engines.due(executor_id, sent)
    assert (call.seq, call.kind, call.input) == (1, "forward_backward", FB)
    output = {"loss": 2.5, "loss_fn_outputs": [{"logprobs": [-1.0]}], "metrics": {"tokens": 1.0}}
    answer(claims, client, create_op.lease, 1, output)
    answer(claims, client, create_op.lease, 1, output)  # a resend after a reconnect
    future = claims.clients.future(MEMBER, first)
    assert future.status == "done" and future.forward_backward.loss == 2.5
    read = claims.clients.client(MEMBER, client)
    assert [p.loss for p in read.loss_history] == [2.5]
    # Two engine-seconds at the floor's $0.18 an hour, charged once.
    assert read.cost_micro_cents == 2 * 5000
    with pytest.raises(errors.DomainError) as caught:
        answer(claims, client, "trl_not-the-lease", 1, output)
    assert caught.value.reason == "LEASE_LOST"
    stranger = Principal(key_id="key_x", org="globex", role="member")
    with pytest.raises(errors.NotFound):
        claims.clients.future(stranger, first)


def test_a_restarted_executor_that_does_not_name_its_client_loses_it(
    claims: ClaimService,
) -> None:
    executor_id, offer = engine(claims)
    client = create(claims)
    [create_op] = claims.engines.due(executor_id, set())
    answer(claims, client, create_op.lease, 0, {})
    pending, _, _ = claims.clients.call(MEMBER, client, 0, "optim_step", {})
    # The same executor reconnecting with its lease goes on with the client.
    _, resumed, _ = claims.hello(PLATFORM, offer, [(client, create_op.lease)])
    assert resumed == [client]
    # Restarted, it names nothing: the client is lost at once, its pending call fails.
    claims.hello(PLATFORM, offer, [])
    read = claims.clients.client(MEMBER, client)
    assert (read.status, read.reason) == ("lost", "executor_lost")
    assert claims.clients.future(MEMBER, pending).error.code == "CLIENT_GONE"
    with pytest.raises(errors.DomainError) as caught:
        claims.clients.call(MEMBER, client, 0, "optim_step", {})
    assert caught.value.reason == "CLIENT_GONE"


def test_a_client_whose_lease_lapses_is_lost_by_the_sweep(config: Config, store: Store) -> None:
    now = [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)]
    claims = ClaimService(store, config, clock=lambda: now[0])
    executor_id, _ = engine(claims)
    client = create(claims)
    [create_op] = claims.engines.due(executor_id, set())
    answer(claims, client, create_op.lease, 0, {})
    # Its stream closed: the client outlives it a while, in case the executor comes back.
    claims.goodbye(executor_id)
    now[0] += dt.timedelta(seconds=10)
    assert claims.expire_leases() == 0
    now[0] += dt.timedelta(seconds=30)
    assert claims.expire_leases() == 1
    read = claims.clients.client(MEMBER, client)
    assert (read.status, read.reason) == ("lost", "executor_lost")
