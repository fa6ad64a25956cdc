import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Publication(_message.Message):
    __slots__ = ("org", "name", "job_id", "sha256", "base_sha256", "form", "route", "forced", "publish_time", "url", "expires")
    ORG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BASE_SHA256_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    org: str
    name: str
    job_id: str
    sha256: str
    base_sha256: str
    form: str
    route: Route
    forced: bool
    publish_time: _timestamp_pb2.Timestamp
    url: str
    expires: int
    def __init__(self, org: _Optional[str] = ..., name: _Optional[str] = ..., job_id: _Optional[str] = ..., sha256: _Optional[str] = ..., base_sha256: _Optional[str] = ..., form: _Optional[str] = ..., route: _Optional[_Union[Route, _Mapping]] = ..., forced: _Optional[bool] = ..., publish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., url: _Optional[str] = ..., expires: _Optional[int] = ...) -> None: ...

class Route(_message.Message):
    __slots__ = ("keys", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: RouteOption
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[RouteOption, _Mapping]] = ...) -> None: ...
    KEYS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.MessageMap[str, RouteOption]
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., options: _Optional[_Mapping[str, RouteOption]] = ...) -> None: ...

class RouteOption(_message.Message):
    __slots__ = ("type", "labels")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    type: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, type: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ...) -> None: ...
