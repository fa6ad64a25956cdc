import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuditEntry(_message.Message):
    __slots__ = ("id", "create_time", "org", "action", "subject", "code", "key_id", "key_label", "key_role", "key_org", "request_id", "details")
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ORG_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_LABEL_FIELD_NUMBER: _ClassVar[int]
    KEY_ROLE_FIELD_NUMBER: _ClassVar[int]
    KEY_ORG_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    id: int
    create_time: _timestamp_pb2.Timestamp
    org: str
    action: str
    subject: str
    code: str
    key_id: str
    key_label: str
    key_role: str
    key_org: str
    request_id: str
    details: _struct_pb2.Struct
    def __init__(self, id: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., org: _Optional[str] = ..., action: _Optional[str] = ..., subject: _Optional[str] = ..., code: _Optional[str] = ..., key_id: _Optional[str] = ..., key_label: _Optional[str] = ..., key_role: _Optional[str] = ..., key_org: _Optional[str] = ..., request_id: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
