import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Artifact(_message.Message):
    __slots__ = ("sha256", "size", "kind", "name", "status", "job_id", "published", "provenance_record_id", "retention_policy", "expires_at", "create_time", "url", "expires", "meta", "pinned", "expire_time", "kept_by", "storage_cost_per_month")
    class MetaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    RETENTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    KEPT_BY_FIELD_NUMBER: _ClassVar[int]
    STORAGE_COST_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    size: float
    kind: str
    name: str
    status: str
    job_id: str
    published: bool
    provenance_record_id: str
    retention_policy: str
    expires_at: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    url: str
    expires: int
    meta: _containers.ScalarMap[str, str]
    pinned: bool
    expire_time: _timestamp_pb2.Timestamp
    kept_by: str
    storage_cost_per_month: float
    def __init__(self, sha256: _Optional[str] = ..., size: _Optional[float] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[str] = ..., job_id: _Optional[str] = ..., published: _Optional[bool] = ..., provenance_record_id: _Optional[str] = ..., retention_policy: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., url: _Optional[str] = ..., expires: _Optional[int] = ..., meta: _Optional[_Mapping[str, str]] = ..., pinned: _Optional[bool] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kept_by: _Optional[str] = ..., storage_cost_per_month: _Optional[float] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("sha256", "stored", "upload", "parts")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    stored: bool
    upload: Transfer
    parts: _containers.RepeatedCompositeFieldContainer[UploadPart]
    def __init__(self, sha256: _Optional[str] = ..., stored: _Optional[bool] = ..., upload: _Optional[_Union[Transfer, _Mapping]] = ..., parts: _Optional[_Iterable[_Union[UploadPart, _Mapping]]] = ...) -> None: ...

class Transfer(_message.Message):
    __slots__ = ("method", "url", "headers", "expires")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METHOD_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    method: str
    url: str
    headers: _containers.ScalarMap[str, str]
    expires: int
    def __init__(self, method: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., expires: _Optional[int] = ...) -> None: ...

class UploadPart(_message.Message):
    __slots__ = ("number", "offset", "size", "url", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    number: int
    offset: int
    size: int
    url: str
    headers: _containers.ScalarMap[str, str]
    def __init__(self, number: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...
