"""The Tinker wire's protobuf, read and written by the SDK's field numbers: the official
SDK's own encoder and decoder (`tinker.proto`, from the installed `tinker` 0.38.0) on the
other side, and the wire's ordering of one model's calls by `seq_id`."""

from __future__ import annotations

import asyncio
import math

import pytest
from tinker import types
from tinker.proto import request_conv, response_conv

from services.tinker import wire
from services.tinker.order import Order
from trainyard.client.v1 import client_pb2
from trainyard.tinker.v1 import tinker_public_pb2 as tp


def sdk_request(loss_fn: str = "cross_entropy", **config: float) -> bytes:
    ids = list(b"hello there")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={
            "target_tokens": ids[1:],
            "weights": [1.0] * (len(ids) - 2) + [0.5],
            "advantages": [2.0] * (len(ids) - 1),
        },
    )
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(
            data=[datum], loss_fn=loss_fn, loss_fn_config=config or None
        ),
        model_id="ses_1:train:0",
        seq_id=7,
    )
    return bytes(request_conv.forward_backward_request_to_proto(request).SerializeToString())


def test_the_sdks_forward_backward_body_reads_as_clientservices_datum() -> None:
    parsed = tp.ForwardBackwardRequest.FromString(sdk_request("ppo", clip_low_threshold=0.7))
    assert (parsed.model_id, parsed.seq_id, parsed.loss_fn) == ("ses_1:train:0", 7, "ppo")
    assert wire.loss_config(parsed) == {"clip_low_threshold": pytest.approx(0.7)}
    ours = wire.datum_to_ours(parsed.data[0])
    ids = list(b"hello there")
    assert list(ours.model_input.tokens) == ids[:-1]
    assert list(ours.loss_fn_inputs.target_tokens) == ids[1:]
    assert list(ours.loss_fn_inputs.weights)[-2:] == [1.0, 0.5]
    assert list(ours.loss_fn_inputs.advantages) == [2.0] * (len(ids) - 1)
    assert list(ours.loss_fn_inputs.logprobs) == []


def test_a_datum_without_targets_is_refused_by_name_not_value() -> None:
    datum = tp.Datum()
    with pytest.raises(wire.WireError, match="target_tokens is required"):
        wire.datum_to_ours(datum)


def test_the_forward_backward_answer_reads_back_in_the_sdk() -> None:
    ours = client_pb2.ForwardBackwardOutput(
        loss=1.5,
        loss_fn_outputs=[
            client_pb2.LossFnOutput(logprobs=[-1.0, -2.0], elementwise_loss=[1.0, 2.0]),
            client_pb2.LossFnOutput(logprobs=[-0.5], elementwise_loss=[0.5]),
        ],
        metrics={"loss:sum": 3.5, "tokens": 3.0},
    )
    out = response_conv.deserialize_forward_backward_output(wire.forward_backward_output(ours))
    assert out.metrics["loss:sum"] == 3.5 and out.metrics["tokens:sum"] == 3.0
    assert [o["logprobs"].tolist() for o in out.loss_fn_outputs] == [[-1.0, -2.0], [-0.5]]
    assert [o["elementwise_loss"].tolist() for o in out.loss_fn_outputs] == [[1.0, 2.0], [0.5]]


def test_the_sample_answer_reads_back_in_the_sdk() -> None:
    ours = client_pb2.SampleOutput(
        sequences=[
            client_pb2.SampledSequence(tokens=[1, 2], logprobs=[-0.5, -0.25], stop_reason="length"),
            client_pb2.SampledSequence(tokens=[3], logprobs=[-1.0], stop_reason="eos"),
        ],
        prompt_logprobs=[math.nan, -2.0, -3.0],
    )
    out = response_conv.deserialize_sample_response(wire.sample_output(ours, prompt_logprobs=True))
    assert [s.tokens for s in out.sequences] == [[1, 2], [3]]
    assert [s.stop_reason for s in out.sequences] == ["length", "stop"]
    assert out.sequences[0].logprobs == [-0.5, -0.25]
    assert out.prompt_logprobs is not None
    assert out.prompt_logprobs[0] is None and out.prompt_logprobs[1:] == [-2.0, -3.0]


def test_metric_names_carry_exactly_one_reduction() -> None:
    assert wire.metric_key("loss:sum") == "loss:sum"
    assert wire.metric_key("grad_norm") == "grad_norm:sum"
    assert wire.metric_key("a:b:c") == "a_b_c:sum"


def test_one_models_calls_are_handed_on_in_seq_order_and_a_repeat_answers_the_first() -> None:
    async def scenario() -> tuple[list[int], list[str]]:
        order = Order()
        handed: list[int] = []

        def submit(seq: int):  # type: ignore[no-untyped-def]
            async def run() -> str:
                handed.append(seq)
                return f"req-{seq}"

            return run

        # The SDK's parallel chunks arrive first-chunk-last: 2 before 1.
        first = await order.run(1, submit(1))  # the first seen starts the order
        later = asyncio.ensure_future(order.run(3, submit(3)))
        await asyncio.sleep(0)
        second = await order.run(2, submit(2))
        third = await later
        again = await order.run(2, submit(2))
        return handed, [first, second, third, again]

    handed, answers = asyncio.run(scenario())
    assert handed == [1, 2, 3]
    assert answers == ["req-1", "req-2", "req-3", "req-2"]
