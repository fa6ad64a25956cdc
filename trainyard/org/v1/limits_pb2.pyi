from trainyard.org.v1 import key_pb2 as _key_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Usage(_message.Message):
    __slots__ = ("used", "limit")
    USED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    used: int
    limit: int
    def __init__(self, used: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class Spend(_message.Message):
    __slots__ = ("used", "limit")
    USED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    used: float
    limit: float
    def __init__(self, used: _Optional[float] = ..., limit: _Optional[float] = ...) -> None: ...

class ProjectSpend(_message.Message):
    __slots__ = ("project", "used", "limit")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    project: str
    used: float
    limit: float
    def __init__(self, project: _Optional[str] = ..., used: _Optional[float] = ..., limit: _Optional[float] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("active_jobs", "training_clients", "pending_uploads", "spend_this_month", "project_spend", "key")
    ACTIVE_JOBS_FIELD_NUMBER: _ClassVar[int]
    TRAINING_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_UPLOADS_FIELD_NUMBER: _ClassVar[int]
    SPEND_THIS_MONTH_FIELD_NUMBER: _ClassVar[int]
    PROJECT_SPEND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    active_jobs: Usage
    training_clients: Usage
    pending_uploads: Usage
    spend_this_month: Spend
    project_spend: _containers.RepeatedCompositeFieldContainer[ProjectSpend]
    key: _key_pb2.ApiKey
    def __init__(self, active_jobs: _Optional[_Union[Usage, _Mapping]] = ..., training_clients: _Optional[_Union[Usage, _Mapping]] = ..., pending_uploads: _Optional[_Union[Usage, _Mapping]] = ..., spend_this_month: _Optional[_Union[Spend, _Mapping]] = ..., project_spend: _Optional[_Iterable[_Union[ProjectSpend, _Mapping]]] = ..., key: _Optional[_Union[_key_pb2.ApiKey, _Mapping]] = ...) -> None: ...
