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
    __slots__ = ("base_model", "adaptation", "protect")
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    PROTECT_FIELD_NUMBER: _ClassVar[int]
    base_model: str
    adaptation: _job_pb2.Adaptation
    protect: _job_pb2.Protection
    def __init__(self, base_model: _Optional[str] = ..., adaptation: _Optional[_Union[_job_pb2.Adaptation, _Mapping]] = ..., protect: _Optional[_Union[_job_pb2.Protection, _Mapping]] = ...) -> None: ...

class ListTrainingClientsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTrainingClientsResponse(_message.Message):
    __slots__ = ("clients", "next_page_token")
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[_client_pb2.TrainingClient]
    next_page_token: str
    def __init__(self, clients: _Optional[_Iterable[_Union[_client_pb2.TrainingClient, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

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

class DeleteTrainingClientResponse(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RunForwardBackwardRequest(_message.Message):
    __slots__ = ("id", "data")
    ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    data: _struct_pb2.ListValue
    def __init__(self, id: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.ListValue, _Mapping]] = ...) -> None: ...

class RunForwardBackwardResponse(_message.Message):
    __slots__ = ("loss",)
    LOSS_FIELD_NUMBER: _ClassVar[int]
    loss: float
    def __init__(self, loss: _Optional[float] = ...) -> None: ...

class RunOptimStepRequest(_message.Message):
    __slots__ = ("id", "learning_rate")
    ID_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    id: str
    learning_rate: float
    def __init__(self, id: _Optional[str] = ..., learning_rate: _Optional[float] = ...) -> None: ...

class RunOptimStepResponse(_message.Message):
    __slots__ = ("step",)
    STEP_FIELD_NUMBER: _ClassVar[int]
    step: int
    def __init__(self, step: _Optional[int] = ...) -> None: ...

class SampleTrainingClientRequest(_message.Message):
    __slots__ = ("id", "prompt", "max_tokens", "temperature")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    id: str
    prompt: str
    max_tokens: int
    temperature: float
    def __init__(self, id: _Optional[str] = ..., prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ...) -> None: ...

class SampleTrainingClientResponse(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class SaveTrainingClientWeightsRequest(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SaveTrainingClientWeightsResponse(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...
