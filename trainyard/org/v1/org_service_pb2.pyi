from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from trainyard.org.v1 import audit_pb2 as _audit_pb2
from trainyard.org.v1 import key_pb2 as _key_pb2
from trainyard.org.v1 import limits_pb2 as _limits_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateKeyRequest(_message.Message):
    __slots__ = ("role", "label", "projects", "bases", "monthly_spend_cap", "ttl_seconds", "body")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PROJECTS_FIELD_NUMBER: _ClassVar[int]
    BASES_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_SPEND_CAP_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    role: str
    label: str
    projects: _containers.RepeatedScalarFieldContainer[str]
    bases: _containers.RepeatedScalarFieldContainer[str]
    monthly_spend_cap: int
    ttl_seconds: int
    body: _struct_pb2.Struct
    def __init__(self, role: _Optional[str] = ..., label: _Optional[str] = ..., projects: _Optional[_Iterable[str]] = ..., bases: _Optional[_Iterable[str]] = ..., monthly_spend_cap: _Optional[int] = ..., ttl_seconds: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ("keys", "next_page_token", "total_size")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[_key_pb2.ApiKey]
    next_page_token: str
    total_size: int
    def __init__(self, keys: _Optional[_Iterable[_Union[_key_pb2.ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class GetKeyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeKeyRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RotateKeyRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListAuditEntriesRequest(_message.Message):
    __slots__ = ("actor", "action", "start_time", "end_time", "page_size", "page_token")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actor: str
    action: str
    start_time: str
    end_time: str
    page_size: int
    page_token: str
    def __init__(self, actor: _Optional[str] = ..., action: _Optional[str] = ..., start_time: _Optional[str] = ..., end_time: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEntriesResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_audit_pb2.AuditEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[_audit_pb2.AuditEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetLimitsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
