from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from trainyard.client.v1 import client_pb2 as _client_pb2
from trainyard.job.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateTrainingClientRequest(_message.Message):
    __slots__ = ("base_model", "adaptation", "protect", "lora_config", "wait", "body", "with_optimizer")
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    PROTECT_FIELD_NUMBER: _ClassVar[int]
    LORA_CONFIG_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    WITH_OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    base_model: str
    adaptation: _job_pb2.Adaptation
    protect: _job_pb2.Protection
    lora_config: _client_pb2.LoraConfig
    wait: int
    body: _struct_pb2.Struct
    with_optimizer: bool
    def __init__(self, base_model: _Optional[str] = ..., adaptation: _Optional[_Union[_job_pb2.Adaptation, _Mapping]] = ..., protect: _Optional[_Union[_job_pb2.Protection, _Mapping]] = ..., lora_config: _Optional[_Union[_client_pb2.LoraConfig, _Mapping]] = ..., wait: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., with_optimizer: _Optional[bool] = ..., **kwargs) -> None: ...

class ListTrainingClientsRequest(_message.Message):
    __slots__ = ("status", "page_size", "page_token")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    status: str
    page_size: int
    page_token: str
    def __init__(self, status: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTrainingClientsResponse(_message.Message):
    __slots__ = ("clients", "next_page_token", "total_size")
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[_client_pb2.TrainingClient]
    next_page_token: str
    total_size: int
    def __init__(self, clients: _Optional[_Iterable[_Union[_client_pb2.TrainingClient, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class GetTrainingClientRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteTrainingClientRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RunForwardBackwardRequest(_message.Message):
    __slots__ = ("id", "seq", "wait", "data", "loss_fn", "body", "deadline_seconds", "forward_only", "loss_fn_config")
    class LossFnConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LOSS_FN_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FORWARD_ONLY_FIELD_NUMBER: _ClassVar[int]
    LOSS_FN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    id: str
    seq: int
    wait: int
    data: _containers.RepeatedCompositeFieldContainer[_client_pb2.Datum]
    loss_fn: str
    body: _struct_pb2.Struct
    deadline_seconds: int
    forward_only: bool
    loss_fn_config: _containers.ScalarMap[str, float]
    def __init__(self, id: _Optional[str] = ..., seq: _Optional[int] = ..., wait: _Optional[int] = ..., data: _Optional[_Iterable[_Union[_client_pb2.Datum, _Mapping]]] = ..., loss_fn: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deadline_seconds: _Optional[int] = ..., forward_only: _Optional[bool] = ..., loss_fn_config: _Optional[_Mapping[str, float]] = ...) -> None: ...

class RunOptimStepRequest(_message.Message):
    __slots__ = ("id", "seq", "wait", "adam_params", "body", "deadline_seconds")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    ADAM_PARAMS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    seq: int
    wait: int
    adam_params: _client_pb2.AdamParams
    body: _struct_pb2.Struct
    deadline_seconds: int
    def __init__(self, id: _Optional[str] = ..., seq: _Optional[int] = ..., wait: _Optional[int] = ..., adam_params: _Optional[_Union[_client_pb2.AdamParams, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deadline_seconds: _Optional[int] = ...) -> None: ...

class SampleTrainingClientRequest(_message.Message):
    __slots__ = ("id", "seq", "wait", "prompt", "num_samples", "sampling_params", "body", "deadline_seconds", "prompt_logprobs", "topk_prompt_logprobs")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_PARAMS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOPK_PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    id: str
    seq: int
    wait: int
    prompt: _client_pb2.ModelInput
    num_samples: int
    sampling_params: _client_pb2.SamplingParams
    body: _struct_pb2.Struct
    deadline_seconds: int
    prompt_logprobs: bool
    topk_prompt_logprobs: int
    def __init__(self, id: _Optional[str] = ..., seq: _Optional[int] = ..., wait: _Optional[int] = ..., prompt: _Optional[_Union[_client_pb2.ModelInput, _Mapping]] = ..., num_samples: _Optional[int] = ..., sampling_params: _Optional[_Union[_client_pb2.SamplingParams, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deadline_seconds: _Optional[int] = ..., prompt_logprobs: _Optional[bool] = ..., topk_prompt_logprobs: _Optional[int] = ...) -> None: ...

class SaveTrainingClientWeightsRequest(_message.Message):
    __slots__ = ("id", "seq", "wait", "name", "kind", "body", "deadline_seconds")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    seq: int
    wait: int
    name: str
    kind: str
    body: _struct_pb2.Struct
    deadline_seconds: int
    def __init__(self, id: _Optional[str] = ..., seq: _Optional[int] = ..., wait: _Optional[int] = ..., name: _Optional[str] = ..., kind: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deadline_seconds: _Optional[int] = ...) -> None: ...

class GetFutureRequest(_message.Message):
    __slots__ = ("id", "wait")
    ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    wait: int
    def __init__(self, id: _Optional[str] = ..., wait: _Optional[int] = ...) -> None: ...
