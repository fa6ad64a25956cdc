import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TrainingClient(_message.Message):
    __slots__ = ("id", "base_model", "adaptation", "loss_history", "create_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    LOSS_HISTORY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    base_model: str
    adaptation: str
    loss_history: _containers.RepeatedScalarFieldContainer[float]
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., base_model: _Optional[str] = ..., adaptation: _Optional[str] = ..., loss_history: _Optional[_Iterable[float]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
