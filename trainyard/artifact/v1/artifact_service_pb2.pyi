from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from trainyard.artifact.v1 import artifact_pb2 as _artifact_pb2
from trainyard.artifact.v1 import provenance_pb2 as _provenance_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateArtifactRequest(_message.Message):
    __slots__ = ("kind", "name", "sha256", "size", "body")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    sha256: str
    size: int
    body: _struct_pb2.Struct
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., sha256: _Optional[str] = ..., size: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListArtifactsRequest(_message.Message):
    __slots__ = ("kind", "page_size", "page_token")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    kind: str
    page_size: int
    page_token: str
    def __init__(self, kind: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListArtifactsResponse(_message.Message):
    __slots__ = ("artifacts", "next_page_token", "total_size")
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    artifacts: _containers.RepeatedCompositeFieldContainer[_artifact_pb2.Artifact]
    next_page_token: str
    total_size: int
    def __init__(self, artifacts: _Optional[_Iterable[_Union[_artifact_pb2.Artifact, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class GetArtifactRequest(_message.Message):
    __slots__ = ("sha256",)
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    def __init__(self, sha256: _Optional[str] = ...) -> None: ...

class DeleteArtifactRequest(_message.Message):
    __slots__ = ("sha256",)
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    def __init__(self, sha256: _Optional[str] = ...) -> None: ...

class PinArtifactRequest(_message.Message):
    __slots__ = ("sha256", "body")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    body: _struct_pb2.Struct
    def __init__(self, sha256: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UnpinArtifactRequest(_message.Message):
    __slots__ = ("sha256", "body")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    body: _struct_pb2.Struct
    def __init__(self, sha256: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ExtendArtifactRequest(_message.Message):
    __slots__ = ("sha256", "ttl_seconds", "body")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    ttl_seconds: int
    body: _struct_pb2.Struct
    def __init__(self, sha256: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DeleteArtifactResponse(_message.Message):
    __slots__ = ("sha256", "deleted", "cascaded")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    CASCADED_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    deleted: bool
    cascaded: _containers.RepeatedCompositeFieldContainer[Cascaded]
    def __init__(self, sha256: _Optional[str] = ..., deleted: _Optional[bool] = ..., cascaded: _Optional[_Iterable[_Union[Cascaded, _Mapping]]] = ...) -> None: ...

class Cascaded(_message.Message):
    __slots__ = ("sha256", "kind", "kept")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    kind: str
    kept: str
    def __init__(self, sha256: _Optional[str] = ..., kind: _Optional[str] = ..., kept: _Optional[str] = ...) -> None: ...

class ConfirmArtifactRequest(_message.Message):
    __slots__ = ("sha256", "body")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    body: _struct_pb2.Struct
    def __init__(self, sha256: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListJobArtifactsRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListJobArtifactsResponse(_message.Message):
    __slots__ = ("artifacts",)
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    artifacts: _containers.RepeatedCompositeFieldContainer[_artifact_pb2.Artifact]
    def __init__(self, artifacts: _Optional[_Iterable[_Union[_artifact_pb2.Artifact, _Mapping]]] = ...) -> None: ...

class DeleteJobArtifactRequest(_message.Message):
    __slots__ = ("id", "sha256")
    ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    id: str
    sha256: str
    def __init__(self, id: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class DeleteJobArtifactResponse(_message.Message):
    __slots__ = ("sha256", "deleted", "cascaded")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    CASCADED_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    deleted: bool
    cascaded: _containers.RepeatedCompositeFieldContainer[Cascaded]
    def __init__(self, sha256: _Optional[str] = ..., deleted: _Optional[bool] = ..., cascaded: _Optional[_Iterable[_Union[Cascaded, _Mapping]]] = ...) -> None: ...

class GetJobProvenanceRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GrantJobArtifactRequest(_message.Message):
    __slots__ = ("job_id", "task_id", "kind", "name", "sha256", "size", "meta")
    class MetaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    task_id: str
    kind: str
    name: str
    sha256: str
    size: int
    meta: _containers.ScalarMap[str, str]
    def __init__(self, job_id: _Optional[str] = ..., task_id: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., sha256: _Optional[str] = ..., size: _Optional[int] = ..., meta: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ConfirmJobArtifactRequest(_message.Message):
    __slots__ = ("job_id", "sha256")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    sha256: str
    def __init__(self, job_id: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class DownloadArtifactRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class ReadArtifactRequest(_message.Message):
    __slots__ = ("sha256",)
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    def __init__(self, sha256: _Optional[str] = ...) -> None: ...

class ReadArtifactResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class RecordProvenanceRequest(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: _provenance_pb2.ProvenanceRecord
    def __init__(self, record: _Optional[_Union[_provenance_pb2.ProvenanceRecord, _Mapping]] = ...) -> None: ...

class SweepArtifactsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SweepArtifactsResponse(_message.Message):
    __slots__ = ("expired", "lapsed")
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    LAPSED_FIELD_NUMBER: _ClassVar[int]
    expired: int
    lapsed: int
    def __init__(self, expired: _Optional[int] = ..., lapsed: _Optional[int] = ...) -> None: ...
