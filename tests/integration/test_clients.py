"""Training clients' rows on SQLite and PostgreSQL: placement on a connected engine, the
order calls reach it in, a `(client, seq)` kept once, an answer applied once and charged
once, and a restarted executor that no longer names its client losing it at once."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import threading

import pytest

from services.claims.service import ClaimService
from services.claims.servicer import ClaimServicer
from services.core import context, errors
from services.core.auth import Principal
from services.core.config import Config
from services.core.offers import Offer
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
    executor_id, _, _, _ = claims.hello(PLATFORM, offer, [])
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
    _, resumed, _, _ = claims.hello(PLATFORM, offer, [(client, create_op.lease)])
    assert resumed == [client]
    # Restarted, it names nothing: the client is lost at once, its pending call fails.
    claims.hello(PLATFORM, offer, [])
    read = claims.clients.client(MEMBER, client)
    assert (read.status, read.reason) == ("lost", "executor_lost")
    assert claims.clients.future(MEMBER, pending).error.code == "CLIENT_GONE"
    with pytest.raises(errors.DomainError) as caught:
        claims.clients.call(MEMBER, client, 0, "optim_step", {})
    assert caught.value.reason == "CLIENT_GONE"


def test_a_create_answered_while_the_operator_passes_is_not_sent_again(
    claims: ClaimService,
) -> None:
    """The stream's operator may pass (its poll, another client's call) while an engine's
    answer to a create is being committed: the create is not sent again with a new lease,
    which would refuse the answer in flight and tell the executor to drop the client, and
    the client's first call reaches the engine."""
    servicer = ClaimServicer(claims, poll_seconds=0.05)
    engines = claims.engines
    due, apply = engines.due, engines.apply
    passes, passed, applied = [0], threading.Event(), threading.Event()

    def counted_due(executor_id: str, sent: set[tuple[str, int]]) -> list:  # type: ignore[type-arg]
        found = due(executor_id, sent)
        passes[0] += 1
        passed.set()
        return found

    def apply_after_a_pass(principal: Principal, result: claim_service_pb2.OperationResult):  # type: ignore[no-untyped-def]
        passed.clear()
        assert passed.wait(10), "the operator did not pass"
        try:
            return apply(principal, result)
        finally:
            applied.set()

    engines.due = counted_due  # type: ignore[method-assign]
    engines.apply = apply_after_a_pass  # type: ignore[method-assign]
    hello = claim_service_pb2.Hello(
        machine="local", platform=True, bases=["fixture-tiny-llm"], devices=["cpu"],
        supports=SUPPORTS, clients=2,
    )  # fmt: skip
    sent: asyncio.Queue[claim_service_pb2.ConnectRequest] = asyncio.Queue()

    async def requests():  # type: ignore[no-untyped-def]
        yield claim_service_pb2.ConnectRequest(hello=hello)
        while True:
            yield await sent.get()

    async def next_pushed(stream) -> claim_service_pb2.ConnectResponse:  # type: ignore[no-untyped-def]
        return await asyncio.wait_for(anext(stream), 10)

    async def run() -> tuple[str, claim_service_pb2.ConnectResponse]:
        context.principal_var.set(PLATFORM)
        stream = servicer.Connect(requests(), None)  # type: ignore[arg-type]
        assert (await anext(stream)).WhichOneof("kind") == "welcome"
        client = await asyncio.to_thread(create, claims)
        created = (await next_pushed(stream)).operation
        assert (created.client, created.kind) == (client, "create")
        answer = claim_service_pb2.OperationResult(
            client=client, lease=created.lease, seq=0, ok=True, output="{}"
        )
        await sent.put(claim_service_pb2.ConnectRequest(result=answer))
        assert await asyncio.to_thread(applied.wait, 10)
        await asyncio.to_thread(claims.clients.call, MEMBER, client, 0, "forward_backward", FB)
        pushed = await next_pushed(stream)
        await stream.aclose()
        return client, pushed

    client, pushed = asyncio.run(run())
    assert passes[0] >= 2
    assert pushed.WhichOneof("kind") == "operation", pushed
    assert (pushed.operation.seq, pushed.operation.kind) == (1, "forward_backward")
    assert claims.clients.client(MEMBER, client).status == "ready"


def test_a_client_its_executor_disowns_is_lost_at_once(claims: ClaimService) -> None:
    """An executor sent a call for a client it holds no engine for says so without a
    lease: the client is lost at once and its call answered; another executor cannot."""
    executor_id, offer = engine(claims)
    client = create(claims)
    [create_op] = claims.engines.due(executor_id, set())
    answer(claims, client, create_op.lease, 0, {})
    pending, _, _ = claims.clients.call(MEMBER, client, 0, "optim_step", {})
    other, _, _, _ = claims.hello(PLATFORM, dataclasses.replace(offer, machine="other"), [])
    claims.engines.disown(other, client)
    assert claims.clients.client(MEMBER, client).status == "ready"
    claims.engines.disown(executor_id, client)
    read = claims.clients.client(MEMBER, client)
    assert (read.status, read.reason) == ("lost", "executor_lost")
    assert claims.clients.future(MEMBER, pending).error.code == "CLIENT_GONE"
    claims.engines.disown(executor_id, client)  # said again: no move
    assert claims.clients.client(MEMBER, client).update_time == read.update_time


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


def test_a_call_queued_past_its_deadline_fails_plainly_and_the_next_call_goes(
    config: Config, store: Store
) -> None:
    now = [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)]
    claims = ClaimService(store, config, clock=lambda: now[0])
    executor_id, _ = engine(claims)
    client = create(claims)
    sent: set[tuple[str, int]] = set()
    [create_op] = claims.engines.due(executor_id, sent)
    sent.add((client, 0))
    answer(claims, client, create_op.lease, 0, {})
    claims.clients.call(MEMBER, client, 0, "forward_backward", FB)
    late, _, _ = claims.clients.call(MEMBER, client, 0, "optim_step", {"deadline_seconds": 5})
    after, _, _ = claims.clients.call(MEMBER, client, 0, "optim_step", {})
    [running] = claims.engines.due(executor_id, sent)
    sent.add((client, running.seq))
    waiting = claims.clients.future(MEMBER, late)
    assert (waiting.status, waiting.queue_position) == ("queued", 1)
    assert waiting.deadline_time.ToDatetime(dt.UTC) == now[0] + dt.timedelta(seconds=5)
    # Nothing answered yet: no estimate rather than a guess.
    assert not waiting.HasField("eta_seconds")
    now[0] += dt.timedelta(seconds=6)
    claims.expire_leases()
    failed = claims.clients.future(MEMBER, late)
    assert failed.status == "failed"
    assert (failed.error.code, failed.error.message) == (
        "DEADLINE_EXCEEDED",
        "The call did not start within its deadline_seconds.",
    )
    # The call before it ends; the call after it goes next, and the late one never does.
    answer(claims, client, create_op.lease, running.seq, {"loss": 1.0})
    [following] = claims.engines.due(executor_id, sent)
    assert (following.seq, following.kind) == (3, "optim_step")
    assert claims.clients.future(MEMBER, late).status == "failed"
    # One answered call of two engine-seconds: the next is due in about two.
    assert claims.clients.future(MEMBER, after).eta_seconds == 2.0


RL_FB = {
    "data": [
        {
            "model_input": {"tokens": [1, 104, 105]},
            "loss_fn_inputs": {
                "target_tokens": [104, 105, 2],
                "logprobs": [-1.5, -2.0, -0.5],
                "advantages": [1.0, -1.0, 0.0],
            },
        }
    ],
    "loss_fn": "ppo",
    "forward_only": True,
    "loss_fn_config": {"clip_low_threshold": 0.7, "clip_high_threshold": 1.3},
}


BAD_STOP = {"prompt": {"tokens": [1]}, "sampling_params": {"stop_tokens": [-7731]}}


def rl_datum(logprobs: list[float], advantages: list[float]) -> dict:  # type: ignore[type-arg]
    inputs = {"target_tokens": [2, 3], "logprobs": logprobs, "advantages": advantages}
    return {"model_input": {"tokens": [1, 2]}, "loss_fn_inputs": inputs}


def _request(kind: str, body: dict) -> object:  # type: ignore[type-arg]
    from services.core import validation as v

    message = {
        "forward_backward": client_service_pb2.RunForwardBackwardRequest,
        "sample": client_service_pb2.SampleTrainingClientRequest,
        "save_weights": client_service_pb2.SaveTrainingClientWeightsRequest,
    }[kind]()
    return v.parse_strict(body, message, scalars=8192)


def test_the_new_inputs_reach_the_engine_as_sent(claims: ClaimService) -> None:
    from services.claims.clients import requests

    executor_id, _ = engine(claims)
    client = create(claims)
    sent: set[tuple[str, int]] = set()
    [create_op] = claims.engines.due(executor_id, sent)
    sent.add((client, 0))
    answer(claims, client, create_op.lease, 0, {})
    given = requests.forward_backward_input(_request("forward_backward", RL_FB))  # type: ignore[arg-type]
    assert given == RL_FB
    sample = {
        "prompt": {"tokens": [1, 104]},
        "prompt_logprobs": True,
        "topk_prompt_logprobs": 2,
        "sampling_params": {"stop_tokens": [2, 7]},
    }
    assert requests.sample_input(_request("sample", sample)) == sample  # type: ignore[arg-type]
    state = {"name": "ckpt", "kind": "state"}
    assert requests.save_weights_input(_request("save_weights", state)) == state  # type: ignore[arg-type]
    claims.clients.call(MEMBER, client, 0, "forward_backward", given)
    [call] = claims.engines.due(executor_id, sent)
    assert (call.kind, call.input) == ("forward_backward", RL_FB)


def test_a_sample_answer_keeps_its_nan_prompt_logprob_and_its_top_k(
    claims: ClaimService,
) -> None:
    executor_id, _ = engine(claims)
    client = create(claims)
    sent: set[tuple[str, int]] = set()
    [create_op] = claims.engines.due(executor_id, sent)
    answer(claims, client, create_op.lease, 0, {})
    future, _, _ = claims.clients.call(MEMBER, client, 0, "sample", {"prompt": {"tokens": [1, 2]}})
    output = {
        "sequences": [{"tokens": [3], "logprobs": [-1.0], "stop_reason": "length"}],
        "prompt_logprobs": ["NaN", -2.5],
        "topk_prompt_logprobs": [{}, {"token_ids": [2, 7], "logprobs": [-2.5, -3.0]}],
    }
    answer(claims, client, create_op.lease, 1, output)
    read = claims.clients.future(MEMBER, future)
    assert read.status == "done"
    logprobs = list(read.sample.prompt_logprobs)
    assert len(logprobs) == 2 and logprobs[0] != logprobs[0] and logprobs[1] == -2.5
    assert list(read.sample.topk_prompt_logprobs[1].token_ids) == [2, 7]


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("forward_backward", {**RL_FB, "loss_fn": "dpo-7731"}, "loss_fn"),
        ("forward_backward", {**RL_FB, "loss_fn_config": {"beta": 7731}}, "loss_fn_config"),
        ("forward_backward", {**RL_FB, "loss_fn_config": {"clip_low_threshold": 7731}}, "loss_fn_config"),
        ("forward_backward", {**RL_FB, "loss_fn": "", "loss_fn_config": {}}, "data[0].loss_fn_inputs.logprobs"),
        (
            "forward_backward",
            {**RL_FB, "data": [rl_datum([-1, -1], [7731])]},
            "data[0].loss_fn_inputs.advantages",
        ),
        (
            "forward_backward",
            {**RL_FB, "data": [rl_datum([-1, 7731], [1, 1])]},
            "data[0].loss_fn_inputs.logprobs",
        ),
        ("sample", {"prompt": {"tokens": [1]}, "topk_prompt_logprobs": 7731}, "topk_prompt_logprobs"),
        ("sample", BAD_STOP, "sampling_params.stop_tokens"),
        ("save_weights", {"name": "a", "kind": "everything-7731"}, "kind"),
    ],
)  # fmt: skip
def test_a_bad_new_input_is_refused_by_its_field_before_anything_is_stored(
    kind: str,
    body: dict,  # type: ignore[type-arg]
    field: str,
) -> None:
    from services.claims.clients import requests

    check = {
        "forward_backward": requests.forward_backward_input,
        "sample": requests.sample_input,
        "save_weights": requests.save_weights_input,
    }[kind]
    with pytest.raises(errors.ValidationError) as caught:
        check(_request(kind, body))  # type: ignore[operator]
    assert caught.value.metadata.get("field", caught.value.fields[0][0]) == field
    assert "7731" not in caught.value.message


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"from": "not-a-sha-7731"}, "from", "INVALID_REQUEST"),
        ({"with_optimizer": True}, "with_optimizer", "INVALID_REQUEST"),
    ],
)
def test_a_create_from_a_bad_origin_is_refused_and_stores_nothing(
    claims: ClaimService,
    body: dict,  # type: ignore[type-arg]
    field: str,
    reason: str,
) -> None:
    from services.core import validation as v

    engine(claims)
    request = v.parse_strict(
        {"base_model": "fixture-tiny-llm", **body},
        client_service_pb2.CreateTrainingClientRequest(),
        scalars=8192,
    )
    with pytest.raises(errors.DomainError) as caught:
        claims.clients.create(OPERATOR, request)
    assert caught.value.reason == reason and "7731" not in caught.value.message
    assert claims.clients.page(MEMBER, "", 0, 10) == ([], 0)


def test_a_client_reads_only_its_own_origin_under_its_lease(claims: ClaimService) -> None:
    executor_id, _ = engine(claims)
    client = create(claims)
    [create_op] = claims.engines.due(executor_id, set())
    ask = claim_service_pb2.ReadTaskInputRequest(
        id=client, task=client, lease=create_op.lease, sha256="ab" * 32
    )
    # A client created from nothing reads nothing.
    with pytest.raises(errors.NotFound):
        claims.engines.read_input(PLATFORM, ask)
    ask.lease = "trl_not-the-lease"
    with pytest.raises(errors.DomainError) as caught:
        claims.engines.read_input(PLATFORM, ask)
    assert caught.value.reason == "LEASE_LOST"
