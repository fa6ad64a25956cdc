import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKey(_message.Message):
    __slots__ = ("id", "org", "role", "label", "projects", "bases", "monthly_spend_cap", "spend_this_month", "expire_time", "create_time", "revoke_time", "last_used_time", "status", "secret")
    ID_FIELD_NUMBER: _ClassVar[int]
    ORG_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PROJECTS_FIELD_NUMBER: _ClassVar[int]
    BASES_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_SPEND_CAP_FIELD_NUMBER: _ClassVar[int]
    SPEND_THIS_MONTH_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    id: str
    org: str
    role: str
    label: str
    projects: _containers.RepeatedScalarFieldContainer[str]
    bases: _containers.RepeatedScalarFieldContainer[str]
    monthly_spend_cap: int
    spend_this_month: float
    expire_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    last_used_time: _timestamp_pb2.Timestamp
    status: str
    secret: str
    def __init__(self, id: _Optional[str] = ..., org: _Optional[str] = ..., role: _Optional[str] = ..., label: _Optional[str] = ..., projects: _Optional[_Iterable[str]] = ..., bases: _Optional[_Iterable[str]] = ..., monthly_spend_cap: _Optional[int] = ..., spend_this_month: _Optional[float] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...
