import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trainyard.job.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TrainingClient(_message.Message):
    __slots__ = ("id", "base_model", "adaptation", "protect", "status", "reason", "message", "step", "seq", "loss_history", "engine_seconds", "cost_micro_cents", "create_time", "update_time", "with_optimizer")
    ID_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    PROTECT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    LOSS_HISTORY_FIELD_NUMBER: _ClassVar[int]
    ENGINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COST_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    WITH_OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    id: str
    base_model: str
    adaptation: _job_pb2.Adaptation
    protect: _job_pb2.Protection
    status: str
    reason: str
    message: str
    step: int
    seq: int
    loss_history: _containers.RepeatedCompositeFieldContainer[LossPoint]
    engine_seconds: float
    cost_micro_cents: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    with_optimizer: bool
    def __init__(self, id: _Optional[str] = ..., base_model: _Optional[str] = ..., adaptation: _Optional[_Union[_job_pb2.Adaptation, _Mapping]] = ..., protect: _Optional[_Union[_job_pb2.Protection, _Mapping]] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., step: _Optional[int] = ..., seq: _Optional[int] = ..., loss_history: _Optional[_Iterable[_Union[LossPoint, _Mapping]]] = ..., engine_seconds: _Optional[float] = ..., cost_micro_cents: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., with_optimizer: _Optional[bool] = ..., **kwargs) -> None: ...

class LossPoint(_message.Message):
    __slots__ = ("seq", "step", "loss")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    step: int
    loss: float
    def __init__(self, seq: _Optional[int] = ..., step: _Optional[int] = ..., loss: _Optional[float] = ...) -> None: ...

class LoraConfig(_message.Message):
    __slots__ = ("rank", "alpha", "targets", "seed")
    RANK_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    rank: int
    alpha: int
    targets: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    def __init__(self, rank: _Optional[int] = ..., alpha: _Optional[int] = ..., targets: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ...) -> None: ...

class ModelInput(_message.Message):
    __slots__ = ("tokens", "text")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedScalarFieldContainer[int]
    text: str
    def __init__(self, tokens: _Optional[_Iterable[int]] = ..., text: _Optional[str] = ...) -> None: ...

class LossFnInputs(_message.Message):
    __slots__ = ("target_tokens", "weights", "logprobs", "advantages")
    TARGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ADVANTAGES_FIELD_NUMBER: _ClassVar[int]
    target_tokens: _containers.RepeatedScalarFieldContainer[int]
    weights: _containers.RepeatedScalarFieldContainer[float]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    advantages: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, target_tokens: _Optional[_Iterable[int]] = ..., weights: _Optional[_Iterable[float]] = ..., logprobs: _Optional[_Iterable[float]] = ..., advantages: _Optional[_Iterable[float]] = ...) -> None: ...

class Datum(_message.Message):
    __slots__ = ("model_input", "loss_fn_inputs")
    MODEL_INPUT_FIELD_NUMBER: _ClassVar[int]
    LOSS_FN_INPUTS_FIELD_NUMBER: _ClassVar[int]
    model_input: ModelInput
    loss_fn_inputs: LossFnInputs
    def __init__(self, model_input: _Optional[_Union[ModelInput, _Mapping]] = ..., loss_fn_inputs: _Optional[_Union[LossFnInputs, _Mapping]] = ...) -> None: ...

class LossFnOutput(_message.Message):
    __slots__ = ("logprobs", "elementwise_loss")
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ELEMENTWISE_LOSS_FIELD_NUMBER: _ClassVar[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    elementwise_loss: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, logprobs: _Optional[_Iterable[float]] = ..., elementwise_loss: _Optional[_Iterable[float]] = ...) -> None: ...

class ForwardBackwardOutput(_message.Message):
    __slots__ = ("loss", "loss_fn_outputs", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    LOSS_FIELD_NUMBER: _ClassVar[int]
    LOSS_FN_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    loss: float
    loss_fn_outputs: _containers.RepeatedCompositeFieldContainer[LossFnOutput]
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, loss: _Optional[float] = ..., loss_fn_outputs: _Optional[_Iterable[_Union[LossFnOutput, _Mapping]]] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class AdamParams(_message.Message):
    __slots__ = ("learning_rate", "beta1", "beta2", "eps")
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    BETA1_FIELD_NUMBER: _ClassVar[int]
    BETA2_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    learning_rate: float
    beta1: float
    beta2: float
    eps: float
    def __init__(self, learning_rate: _Optional[float] = ..., beta1: _Optional[float] = ..., beta2: _Optional[float] = ..., eps: _Optional[float] = ...) -> None: ...

class OptimStepOutput(_message.Message):
    __slots__ = ("step", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    STEP_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    step: int
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, step: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ("max_tokens", "temperature", "top_k", "top_p", "seed", "stop", "stop_tokens")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    stop_tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_k: _Optional[int] = ..., top_p: _Optional[float] = ..., seed: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., stop_tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class SampledSequence(_message.Message):
    __slots__ = ("tokens", "logprobs", "text", "stop_reason")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    text: str
    stop_reason: str
    def __init__(self, tokens: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ..., text: _Optional[str] = ..., stop_reason: _Optional[str] = ...) -> None: ...

class TopkLogprobs(_message.Message):
    __slots__ = ("token_ids", "logprobs")
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, token_ids: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class SampleOutput(_message.Message):
    __slots__ = ("sequences", "prompt_logprobs", "topk_prompt_logprobs")
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOPK_PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    sequences: _containers.RepeatedCompositeFieldContainer[SampledSequence]
    prompt_logprobs: _containers.RepeatedScalarFieldContainer[float]
    topk_prompt_logprobs: _containers.RepeatedCompositeFieldContainer[TopkLogprobs]
    def __init__(self, sequences: _Optional[_Iterable[_Union[SampledSequence, _Mapping]]] = ..., prompt_logprobs: _Optional[_Iterable[float]] = ..., topk_prompt_logprobs: _Optional[_Iterable[_Union[TopkLogprobs, _Mapping]]] = ...) -> None: ...

class SaveWeightsOutput(_message.Message):
    __slots__ = ("name", "sha256", "size", "step", "kind", "optimizer")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    name: str
    sha256: str
    size: float
    step: int
    kind: str
    optimizer: bool
    def __init__(self, name: _Optional[str] = ..., sha256: _Optional[str] = ..., size: _Optional[float] = ..., step: _Optional[int] = ..., kind: _Optional[str] = ..., optimizer: _Optional[bool] = ...) -> None: ...

class OperationError(_message.Message):
    __slots__ = ("code", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    field: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class Future(_message.Message):
    __slots__ = ("id", "client_id", "seq", "kind", "status", "queue_position", "forward_backward", "optim_step", "sample", "save_weights", "error", "engine_seconds", "create_time", "eta_seconds", "deadline_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    FORWARD_BACKWARD_FIELD_NUMBER: _ClassVar[int]
    OPTIM_STEP_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_FIELD_NUMBER: _ClassVar[int]
    SAVE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ENGINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    client_id: str
    seq: int
    kind: str
    status: str
    queue_position: int
    forward_backward: ForwardBackwardOutput
    optim_step: OptimStepOutput
    sample: SampleOutput
    save_weights: SaveWeightsOutput
    error: OperationError
    engine_seconds: float
    create_time: _timestamp_pb2.Timestamp
    eta_seconds: float
    deadline_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., client_id: _Optional[str] = ..., seq: _Optional[int] = ..., kind: _Optional[str] = ..., status: _Optional[str] = ..., queue_position: _Optional[int] = ..., forward_backward: _Optional[_Union[ForwardBackwardOutput, _Mapping]] = ..., optim_step: _Optional[_Union[OptimStepOutput, _Mapping]] = ..., sample: _Optional[_Union[SampleOutput, _Mapping]] = ..., save_weights: _Optional[_Union[SaveWeightsOutput, _Mapping]] = ..., error: _Optional[_Union[OperationError, _Mapping]] = ..., engine_seconds: _Optional[float] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., eta_seconds: _Optional[float] = ..., deadline_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
