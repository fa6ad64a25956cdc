"""The Tinker SDK's protobuf bodies, read and written by its field numbers
(proto/trainyard/tinker/v1/tinker_public.proto), and ClientService's messages built from
them. Arrays travel as raw little-endian bytes."""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence

from trainyard.client.v1 import client_pb2
from trainyard.tinker.v1 import tinker_public_pb2 as tp

FLOAT32, INT64, INT32 = tp.D_TYPE_FLOAT32, tp.D_TYPE_INT64, tp.D_TYPE_INT32
_FORMATS: dict[int, str] = {FLOAT32: "f", INT64: "q", INT32: "i"}


class WireError(ValueError):
    """A body the SDK would never send; the message names the field, never its value."""


def _values(raw: bytes, dtype: int) -> list[float] | list[int]:
    fmt = _FORMATS.get(dtype)
    if fmt is None:
        raise WireError("a loss input has a dtype Trainyard does not read")
    size = struct.calcsize(fmt)
    if len(raw) % size:
        raise WireError("a loss input's bytes are not whole elements")
    return list(struct.unpack(f"<{len(raw) // size}{fmt}", raw))


def tensor_values(tensor: tp.Tensor) -> list[float] | list[int]:
    """A 1-D tensor's elements; a sparse one is filled in with zeros."""
    if tensor.HasField("sparse_csr"):
        if len(tensor.shape) != 2 or tensor.shape[0] != 1:
            raise WireError("a sparse loss input must be one row")
        values = _values(tensor.sparse_csr.values, tensor.dtype)
        cols = _values(tensor.sparse_csr.col_indices, INT64)
        dense: list[float] = [0.0] * int(tensor.shape[1])
        for col, value in zip(cols, values, strict=True):
            dense[int(col)] = value
        return dense
    return _values(tensor.dense, tensor.dtype)


def tokens_of(datum: tp.Datum) -> list[int]:
    out: list[int] = []
    for chunk in datum.model_input:
        if not chunk.HasField("encoded_text"):
            raise WireError("model_input: only encoded text chunks are served")
        out.extend(int(t) for t in _values(chunk.encoded_text.tokens, INT32))
    return out


def datum_to_ours(datum: tp.Datum) -> client_pb2.Datum:
    """One SDK datum as ClientService's: the tokens, `target_tokens` and `weights`."""
    inputs = datum.loss_fn_inputs
    if "target_tokens" not in inputs:
        raise WireError("loss_fn_inputs: target_tokens is required")
    targets = [int(t) for t in tensor_values(inputs["target_tokens"])]

    def floats(name: str) -> list[float]:
        return [float(w) for w in tensor_values(inputs[name])] if name in inputs else []

    return client_pb2.Datum(
        model_input=client_pb2.ModelInput(tokens=tokens_of(datum)),
        loss_fn_inputs=client_pb2.LossFnInputs(
            target_tokens=targets,
            weights=floats("weights"),
            logprobs=floats("logprobs"),
            advantages=floats("advantages"),
        ),
    )


def _floats(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _batched(per_datum: Sequence[Sequence[float]]) -> tp.BatchedTensor:
    offsets = [0]
    data = b""
    for values in per_datum:
        data += _floats(values)
        offsets.append(len(data))
    return tp.BatchedTensor(
        data=data, offsets=struct.pack(f"<{len(offsets)}q", *offsets), dtype=FLOAT32
    )


def metric_key(name: str) -> str:
    """The SDK folds metrics by `name:reduction`; a name without one is a sum."""
    return name if name.count(":") == 1 else f"{name.replace(':', '_')}:sum"


def forward_backward_output(output: client_pb2.ForwardBackwardOutput) -> bytes:
    logprobs = [list(o.logprobs) for o in output.loss_fn_outputs]
    elementwise = [list(o.elementwise_loss) for o in output.loss_fn_outputs]
    record = tp.ArrayRecord(type_tag="ArrayRecord", num_datums=len(logprobs))
    record.fields["logprobs"].CopyFrom(_batched(logprobs))
    record.fields["elementwise_loss"].CopyFrom(_batched(elementwise))
    answer = tp.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
    answer.loss_fn_outputs.append(record)
    for name, value in output.metrics.items():
        answer.metrics[metric_key(name)] = value
    answer.metrics.setdefault("loss:mean", output.loss)
    return bytes(answer.SerializeToString())


def sample_output(output: client_pb2.SampleOutput, *, prompt_logprobs: bool) -> bytes:
    answer = tp.SampleResponse()
    for seq in output.sequences:
        answer.sequences.append(
            tp.SampledSequence(
                stop_reason=tp.STOP_REASON_LENGTH
                if seq.stop_reason == "length"
                else tp.STOP_REASON_UNSPECIFIED,
                tokens=struct.pack(f"<{len(seq.tokens)}i", *seq.tokens),
                logprobs=_floats(list(seq.logprobs)),
            )
        )
    if prompt_logprobs:
        found = list(output.prompt_logprobs)
        answer.prompt_logprobs = _floats([math.nan, *found[1:]] if found else [])
    return bytes(answer.SerializeToString())


def loss_config(request: tp.ForwardBackwardRequest) -> Mapping[str, float]:
    """The loss's numeric settings, from either of the SDK's fields."""
    config = dict(request.loss_fn_config)
    for name, value in request.loss_fn_config_v2.items():
        if value.WhichOneof("value") == "number":
            config[name] = value.number
    return config
