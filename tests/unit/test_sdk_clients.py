"""The SDK's training-client helpers that need no server: what a datum, a prompt and
Adam's settings become, and the order and numbers calls go out with."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest

from trainyard import sdk, sdk_clients
from trainyard.client.v1 import client_pb2


def test_datum_shapes() -> None:
    text = sdk.to_datum("hello")
    assert text.model_input.text == "hello" and not text.loss_fn_inputs.target_tokens
    tokens = sdk.datum_from_tokens([1, 2, 3], [2, 3, 4], [1.0, 0.5, 0.0])
    assert list(tokens.model_input.tokens) == [1, 2, 3]
    assert list(tokens.loss_fn_inputs.target_tokens) == [2, 3, 4]
    assert list(tokens.loss_fn_inputs.weights) == [1.0, 0.5, 0.0]
    as_dict = {
        "model_input": {"tokens": [1, 2, 3]},
        "loss_fn_inputs": {"target_tokens": [2, 3, 4], "weights": [1.0, 0.5, 0.0]},
    }
    assert sdk.to_datum(as_dict) == tokens
    assert sdk.to_datum(tokens) is tokens
    with pytest.raises(TypeError):
        sdk.to_datum(42)  # type: ignore[arg-type]


def test_prompt_shapes() -> None:
    assert sdk.to_model_input("hi") == client_pb2.ModelInput(text="hi")
    assert sdk.to_model_input([5, 6]) == client_pb2.ModelInput(tokens=[5, 6])
    assert sdk.to_model_input({"tokens": [7]}) == client_pb2.ModelInput(tokens=[7])
    with pytest.raises(TypeError):
        sdk.to_model_input([1.5, 2])  # type: ignore[list-item]


def test_future_error_carries_reason_and_field() -> None:
    future = client_pb2.Future(
        status="failed",
        error=client_pb2.OperationError(code="INVALID_REQUEST", message="m", field="data"),
    )
    err = sdk_clients._future_error(future)
    assert (err.code, err.reason, err.metadata) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_REQUEST",
        {"field": "data"},
    )


class _Stub:
    """The client service's unary methods, answering each call `done` in-line at the
    sequence number it was sent with (or the next, for 0), and recording it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def __getattr__(self, method: str) -> Any:
        def call(request: Any, **_: Any) -> Any:
            if method == "GetTrainingClient":
                return client_pb2.TrainingClient(id=request.id, status="ready")
            with self.lock:
                self.sent.append((method, request.seq))
            kind = {v: k for k, v in sdk_clients._METHODS.items()}[method]
            return client_pb2.Future(
                id=f"fut_{request.seq}", seq=request.seq, kind=kind, status="done"
            )

        return call


def test_calls_go_out_in_order_with_consecutive_seqs() -> None:
    client = sdk.Client("http://127.0.0.1:1", "ty_x")
    stub = _Stub()
    client.clients = stub  # type: ignore[assignment]
    trainer = sdk.TrainingClient(client, client_pb2.TrainingClient(id="cli_1", seq=4))
    futures = []
    for _ in range(5):
        futures.append(trainer.forward_backward(["a b"]))
        futures.append(trainer.optim_step({"learning_rate": 1e-2}))
    futures.append(trainer.sample("a", sampling_params={"temperature": 0}))
    futures.append(trainer.save_weights("w"))
    outputs = [f.result(timeout=5) for f in futures]
    assert [seq for _, seq in stub.sent] == list(range(5, 5 + len(futures)))
    assert [f.seq for f in futures] == list(range(5, 5 + len(futures)))
    assert isinstance(outputs[0], client_pb2.ForwardBackwardOutput)
    assert isinstance(outputs[1], client_pb2.OptimStepOutput)
    assert isinstance(outputs[-2], client_pb2.SampleOutput)
    assert isinstance(outputs[-1], client_pb2.SaveWeightsOutput)
    trainer.close()
    with pytest.raises(RuntimeError):
        trainer.optim_step()
    client.close()


class _LateStub(_Stub):
    """Answers each call failed at its deadline when it asked for one, recording it."""

    def __getattr__(self, method: str) -> Any:
        def call(request: Any, **_: Any) -> Any:
            if method == "GetTrainingClient":
                return client_pb2.TrainingClient(id=request.id, status="ready")
            self.sent.append((method, request.deadline_seconds))
            if not request.HasField("deadline_seconds"):
                return client_pb2.Future(id="fut_1", seq=request.seq, status="done")
            error = client_pb2.OperationError(code="DEADLINE_EXCEEDED", message="late")
            return client_pb2.Future(id="fut_1", seq=request.seq, status="failed", error=error)

        return call


def test_a_call_sends_its_deadline_and_a_late_one_raises_its_reason() -> None:
    client = sdk.Client("http://127.0.0.1:1", "ty_x")
    stub = _LateStub()
    client.clients = stub  # type: ignore[assignment]
    trainer = sdk.TrainingClient(client, client_pb2.TrainingClient(id="cli_1", seq=0))
    late = trainer.sample("a", deadline_seconds=2)
    with pytest.raises(sdk_clients.TrainyardError) as caught:
        late.result(timeout=5)
    assert caught.value.reason == "DEADLINE_EXCEEDED"
    trainer.optim_step().result(timeout=5)
    assert stub.sent == [("SampleTrainingClient", 2), ("RunOptimStep", 0)]
    trainer.close()
    client.close()
