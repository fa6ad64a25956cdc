import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Webhook(_message.Message):
    __slots__ = ("id", "url", "events", "description", "stalled_after_seconds", "expiring_within_seconds", "thresholds_percent", "secret", "create_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STALLED_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXPIRING_WITHIN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_PERCENT_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    url: str
    events: _containers.RepeatedScalarFieldContainer[str]
    description: str
    stalled_after_seconds: int
    expiring_within_seconds: int
    thresholds_percent: _containers.RepeatedScalarFieldContainer[int]
    secret: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., url: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., stalled_after_seconds: _Optional[int] = ..., expiring_within_seconds: _Optional[int] = ..., thresholds_percent: _Optional[_Iterable[int]] = ..., secret: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ("id", "webhook_id", "message_id", "event_type", "status", "attempts", "last_status_code", "last_error", "next_attempt_time", "create_time", "payload", "last_attempt_time", "redelivery_of")
    ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    LAST_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_OF_FIELD_NUMBER: _ClassVar[int]
    id: str
    webhook_id: str
    message_id: str
    event_type: str
    status: str
    attempts: int
    last_status_code: int
    last_error: str
    next_attempt_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    payload: _struct_pb2.Struct
    last_attempt_time: _timestamp_pb2.Timestamp
    redelivery_of: str
    def __init__(self, id: _Optional[str] = ..., webhook_id: _Optional[str] = ..., message_id: _Optional[str] = ..., event_type: _Optional[str] = ..., status: _Optional[str] = ..., attempts: _Optional[int] = ..., last_status_code: _Optional[int] = ..., last_error: _Optional[str] = ..., next_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., redelivery_of: _Optional[str] = ...) -> None: ...
