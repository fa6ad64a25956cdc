import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobEvent(_message.Message):
    __slots__ = ("seq", "type", "create_time", "attempt_number", "status", "previous_status", "reason", "name", "step", "value", "line", "sha256")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    seq: int
    type: str
    create_time: _timestamp_pb2.Timestamp
    attempt_number: int
    status: str
    previous_status: str
    reason: str
    name: str
    step: int
    value: float
    line: str
    sha256: str
    def __init__(self, seq: _Optional[int] = ..., type: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt_number: _Optional[int] = ..., status: _Optional[str] = ..., previous_status: _Optional[str] = ..., reason: _Optional[str] = ..., name: _Optional[str] = ..., step: _Optional[int] = ..., value: _Optional[float] = ..., line: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class MetricSeries(_message.Message):
    __slots__ = ("name", "points")
    NAME_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    points: _containers.RepeatedCompositeFieldContainer[MetricPoint]
    def __init__(self, name: _Optional[str] = ..., points: _Optional[_Iterable[_Union[MetricPoint, _Mapping]]] = ...) -> None: ...

class MetricPoint(_message.Message):
    __slots__ = ("step", "value", "create_time")
    STEP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    step: int
    value: float
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, step: _Optional[int] = ..., value: _Optional[float] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
