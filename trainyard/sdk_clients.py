"""The SDK's interactive training clients (Tinker's loop): a model an engine holds in
memory, trained call by call, each call answered by an `APIFuture`. `Client` makes them
(`create_training_client`, `training_client`)."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from trainyard.client.v1 import client_pb2, client_service_pb2
from trainyard.sdk_base import TrainyardError

if TYPE_CHECKING:
    from trainyard.sdk import Client

# The server's longest `wait`, and how much longer than a call's `wait` its deadline is.
MAX_WAIT = 120
RPC_MARGIN = 30
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_ENDED = ("done", "failed")
_METHODS = {
    "forward_backward": "RunForwardBackward",
    "optim_step": "RunOptimStep",
    "sample": "SampleTrainingClient",
    "save_weights": "SaveTrainingClientWeights",
}
# The status code of a failed future's reason, as the service raises it in-line.
_FAILED_CODES = {
    "INVALID_REQUEST": grpc.StatusCode.INVALID_ARGUMENT,
    "INTERNAL_ERROR": grpc.StatusCode.UNAVAILABLE,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
}

Output = (
    client_pb2.ForwardBackwardOutput
    | client_pb2.OptimStepOutput
    | client_pb2.SampleOutput
    | client_pb2.SaveWeightsOutput
)
DatumLike = client_pb2.Datum | Mapping[str, Any] | str
PromptLike = client_pb2.ModelInput | Mapping[str, Any] | str | Sequence[int]


def datum_from_text(text: str) -> client_pb2.Datum:
    """A datum of text alone: each position predicts the next token."""
    return client_pb2.Datum(model_input=client_pb2.ModelInput(text=text))


def datum_from_tokens(
    tokens: Sequence[int], targets: Sequence[int], weights: Sequence[float] | None = None
) -> client_pb2.Datum:
    """A datum of token ids, the token each position should predict, and their weights
    (1 each when None)."""
    return client_pb2.Datum(
        model_input=client_pb2.ModelInput(tokens=list(tokens)),
        loss_fn_inputs=client_pb2.LossFnInputs(
            target_tokens=list(targets), weights=list(weights or ())
        ),
    )


def to_datum(item: DatumLike) -> client_pb2.Datum:
    """A Datum from a Datum, its proto-JSON dict, or text."""
    if isinstance(item, client_pb2.Datum):
        return item
    if isinstance(item, str):
        return datum_from_text(item)
    if isinstance(item, Mapping):
        return json_format.ParseDict(dict(item), client_pb2.Datum())
    raise TypeError(f"a datum must be a Datum, a dict or text, not {type(item).__name__}")


def to_model_input(prompt: PromptLike) -> client_pb2.ModelInput:
    """A ModelInput from text, token ids, its proto-JSON dict, or a ModelInput."""
    if isinstance(prompt, client_pb2.ModelInput):
        return prompt
    if isinstance(prompt, str):
        return client_pb2.ModelInput(text=prompt)
    if isinstance(prompt, Mapping):
        return json_format.ParseDict(dict(prompt), client_pb2.ModelInput())
    if isinstance(prompt, Sequence) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return client_pb2.ModelInput(tokens=list(cast(Sequence[int], prompt)))
    raise TypeError("a prompt must be text, token ids, a dict or a ModelInput")


def _message(value: Any, kind: type[Any]) -> Any:
    if value is None:
        return kind()
    if isinstance(value, kind):
        return value
    return json_format.ParseDict(dict(value), kind())


def _transient(exc: grpc.RpcError) -> bool:
    """A failure of the transport (no ErrorInfo: the gateway or service never answered),
    which the same request, sent again, may get past."""
    if exc.code() not in _TRANSIENT:  # type: ignore[attr-defined]
        return False
    try:
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    except ValueError:
        return True
    return not any(
        d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR) for d in (status.details if status else ())
    )


def check_live(client: client_pb2.TrainingClient) -> None:
    """Raise `CLIENT_GONE` unless the client is placing or ready."""
    if client.status not in ("placing", "ready"):
        raise TrainyardError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "CLIENT_GONE",
            client.message or f"The training client is {client.status}.",
            {"status": client.status, "reason": client.reason},
        )


def _future_error(future: client_pb2.Future) -> TrainyardError:
    err = future.error
    reason = err.code or "INTERNAL_ERROR"
    return TrainyardError(
        _FAILED_CODES.get(reason, grpc.StatusCode.FAILED_PRECONDITION),
        reason,
        err.message or "The call failed.",
        {"field": err.field} if err.field else {},
    )


class APIFuture:
    """One call on a training client, on its way: `result()` waits for its output."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        # Known once the call was accepted: the future's id and the call's sequence number.
        self.future_id = ""
        self.seq = 0
        # While it waits: calls of the client ahead of it, and the seconds until it is
        # answered as the service estimates them (None until it has measured calls).
        self.queue_position = 0
        self.eta_seconds: float | None = None
        self._done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def result(self, timeout: float | None = None) -> Any:
        """The call's output (`ForwardBackwardOutput`, `OptimStepOutput`, `SampleOutput`
        or `SaveWeightsOutput`); raises its `TrainyardError` when it failed, and
        `TimeoutError` when it has not ended within `timeout` seconds."""
        return self._done.result(timeout)

    def done(self) -> bool:
        return self._done.done()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._done.exception(timeout)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<APIFuture {self.kind} seq={self.seq} {self.future_id or '-'} {state}>"


class _Call:
    def __init__(self, kind: str, payload: Mapping[str, Any]) -> None:
        self.kind = kind
        self.payload = payload
        self.future = APIFuture(kind)


class TrainingClient:
    """A model an engine holds in memory, trained call by call (Tinker's loop).

    Each call answers an `APIFuture` at once: one worker thread sends the calls in the
    order they were made, with consecutive sequence numbers, so they may be pipelined. A
    call that does not end within `call_wait` seconds is long-polled; one cut off by the
    transport is sent again with the same sequence number (which never runs twice) for up
    to `retry_for` seconds. As a context manager it deletes the client on exit."""

    def __init__(
        self,
        sdk: Client,
        client: client_pb2.TrainingClient,
        *,
        org: str = "",
        call_wait: int = 30,
        retry_for: float = 60.0,
    ) -> None:
        self.id = client.id
        self.base_model = client.base_model
        self._sdk = sdk
        self._org = org
        self._wait = max(0, min(call_wait, MAX_WAIT))
        self._retry_for = retry_for
        # The next call's sequence number; only the worker moves it after this.
        self._next_seq = max(client.seq, 0) + 1
        self._queue: queue.Queue[_Call | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name=f"trainyard-{self.id}", daemon=True)
        self._worker.start()

    def __enter__(self) -> TrainingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def __repr__(self) -> str:
        return f"<TrainingClient {self.id} {self.base_model}>"

    # -- reads and lifecycle ---------------------------------------------------------------

    def get(self) -> client_pb2.TrainingClient:
        """The client as the service holds it: status, step, seq and loss history."""
        return self._send(
            "GetTrainingClient", client_service_pb2.GetTrainingClientRequest(id=self.id)
        )  # type: ignore[no-any-return]

    def losses(self) -> list[float]:
        """The loss of each forward_backward applied, in order."""
        return [p.loss for p in self.get().loss_history]

    def delete(self) -> client_pb2.TrainingClient:
        """Drop the client and free its engine memory; calls not yet answered fail."""
        self.close()
        return self._send(  # type: ignore[no-any-return]
            "DeleteTrainingClient", client_service_pb2.DeleteTrainingClientRequest(id=self.id)
        )

    def close(self) -> None:
        """Take no more calls; those made still go out. The client itself stays."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(None)

    # -- calls -----------------------------------------------------------------------------

    def forward_backward(
        self,
        data: Iterable[DatumLike],
        loss_fn: str = "cross_entropy",
        loss_fn_config: Mapping[str, float] | None = None,
        *,
        deadline_seconds: int | None = None,
    ) -> APIFuture:
        """Accumulate gradients over `data` (Datums, their proto-JSON dicts, or text) of
        `loss_fn`: `cross_entropy`, or `importance_sampling` and `ppo` (their datums carry
        `target_tokens`, `logprobs` and `advantages`; `ppo`'s `loss_fn_config` may set
        `clip_low_threshold` and `clip_high_threshold`). Every call takes
        `deadline_seconds` (1 to 3600): not started within it, the call fails
        `DEADLINE_EXCEEDED` rather than wait."""
        return self._submit(
            "forward_backward",
            {
                "data": [to_datum(d) for d in data],
                "loss_fn": loss_fn,
                "loss_fn_config": dict(loss_fn_config or {}),
            },
            deadline_seconds,
        )

    def forward(
        self,
        data: Iterable[DatumLike],
        loss_fn: str = "cross_entropy",
        loss_fn_config: Mapping[str, float] | None = None,
        *,
        deadline_seconds: int | None = None,
    ) -> APIFuture:
        """The forward alone: `forward_backward`'s answer (logprobs, elementwise loss and
        loss) with no gradient kept."""
        return self._submit(
            "forward_backward",
            {
                "data": [to_datum(d) for d in data],
                "loss_fn": loss_fn,
                "loss_fn_config": dict(loss_fn_config or {}),
                "forward_only": True,
            },
            deadline_seconds,
        )

    def optim_step(
        self,
        adam_params: Mapping[str, Any] | client_pb2.AdamParams | None = None,
        *,
        deadline_seconds: int | None = None,
    ) -> APIFuture:
        """Apply Adam (`learning_rate`, `beta1`, `beta2`, `eps`) to the gradients."""
        return self._submit(
            "optim_step",
            {"adam_params": _message(adam_params, client_pb2.AdamParams)},
            deadline_seconds,
        )

    def sample(
        self,
        prompt: PromptLike,
        num_samples: int = 1,
        sampling_params: Mapping[str, Any] | client_pb2.SamplingParams | None = None,
        *,
        prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        deadline_seconds: int | None = None,
    ) -> APIFuture:
        """Decode from the current weights; `sampling_params` as `SamplingParams`
        (`{"max_tokens": 16, "temperature": 0}` decodes greedily). With `prompt_logprobs`
        the answer holds each prompt token's log-probability (the first NaN), with
        `topk_prompt_logprobs` k each prompt position's k likeliest tokens."""
        return self._submit(
            "sample",
            {
                "prompt": to_model_input(prompt),
                "num_samples": num_samples,
                "sampling_params": _message(sampling_params, client_pb2.SamplingParams),
                "prompt_logprobs": prompt_logprobs,
                "topk_prompt_logprobs": topk_prompt_logprobs,
            },
            deadline_seconds,
        )

    def save_weights(
        self, name: str, *, kind: str = "lora", deadline_seconds: int | None = None
    ) -> APIFuture:
        """Write the adapter as an artifact of the org; the output names its sha256. Kind
        `state` writes the optimizer's state beside it, for a client created `from_` it
        `with_optimizer`."""
        return self._submit("save_weights", {"name": name, "kind": kind}, deadline_seconds)

    def save_state(self, name: str, *, deadline_seconds: int | None = None) -> APIFuture:
        """`save_weights` of kind `state`: the adapter and the optimizer's state."""
        return self.save_weights(name, kind="state", deadline_seconds=deadline_seconds)

    # -- the worker --------------------------------------------------------------------------

    def _submit(
        self, kind: str, payload: Mapping[str, Any], deadline_seconds: int | None = None
    ) -> APIFuture:
        if deadline_seconds is not None:
            payload = {**payload, "deadline_seconds": deadline_seconds}
        call = _Call(kind, payload)
        with self._lock:  # the queue's order is the calls' order, and so their seqs'
            if self._closed:
                raise RuntimeError(f"training client {self.id} is closed")
            self._queue.put(call)
        return call.future

    def _run(self) -> None:
        while (call := self._queue.get()) is not None:
            try:
                output = self._execute(call)
            except BaseException as exc:  # handed to the caller
                call.future._done.set_exception(exc)
            else:
                call.future._done.set_result(output)

    def _execute(self, call: _Call) -> Output:
        method = _METHODS[call.kind]
        seq, bumps = self._next_seq, 0
        while True:
            request = _REQUESTS[call.kind](id=self.id, seq=seq, wait=self._wait, **call.payload)
            try:
                future: client_pb2.Future = self._send(
                    method, request, timeout=self._wait + RPC_MARGIN
                )
                break
            except TrainyardError as exc:
                if exc.reason == "IDEMPOTENCY_KEY_REUSED" and bumps < 64:
                    # Another call holds this number (one made before attaching, or one
                    # that failed in-line): take the next.
                    seq, bumps = seq + 1, bumps + 1
                    continue
                self._next_seq = self._after_refusal(seq)
                if self._next_seq > seq:  # it took its number, and failed on the engine
                    call.future.seq = seq
                raise
        self._next_seq = future.seq + 1
        call.future.future_id, call.future.seq = future.id, future.seq
        while future.status not in _ENDED:
            call.future.queue_position = future.queue_position
            call.future.eta_seconds = future.eta_seconds if future.HasField("eta_seconds") else None
            future = self._send(
                "GetFuture",
                client_service_pb2.GetFutureRequest(id=future.id, wait=self._wait),
                timeout=self._wait + RPC_MARGIN,
            )
        call.future.queue_position, call.future.eta_seconds = 0, None
        if future.status == "failed":
            raise _future_error(future)
        return getattr(future, future.WhichOneof("output") or call.kind)  # type: ignore[no-any-return]

    def _after_refusal(self, seq: int) -> int:
        """The next number after a call refused in-line: past it when the engine applied
        it (it failed there), else the same (it was refused before it was stored, and a
        gap would hold every later call back)."""
        try:
            applied = self.get().seq
        except TrainyardError:
            return seq  # the next call finds out, by IDEMPOTENCY_KEY_REUSED
        return seq + 1 if applied >= seq else seq

    def _send(self, method: str, request: Any, *, timeout: float | None = None) -> Any:
        """One unary call, sent again unchanged while the transport fails, for up to
        `retry_for` seconds."""
        md = self._sdk._md(**({"x-org-id": self._org} if self._org else {}))
        stub = getattr(self._sdk.clients, method)
        deadline, delay = time.monotonic() + self._retry_for, 0.25
        while True:
            try:
                return stub(request, metadata=md, timeout=timeout or self._sdk._timeout)
            except grpc.RpcError as exc:
                if not _transient(exc) or time.monotonic() + delay > deadline:
                    raise TrainyardError.from_rpc(exc) from None
            time.sleep(delay)
            delay = min(delay * 2, 8.0)


_REQUESTS: dict[str, Callable[..., Any]] = {
    "forward_backward": client_service_pb2.RunForwardBackwardRequest,
    "optim_step": client_service_pb2.RunOptimStepRequest,
    "sample": client_service_pb2.SampleTrainingClientRequest,
    "save_weights": client_service_pb2.SaveTrainingClientWeightsRequest,
}
