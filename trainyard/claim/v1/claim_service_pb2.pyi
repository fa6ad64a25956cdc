from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from trainyard.artifact.v1 import artifact_pb2 as _artifact_pb2
from trainyard.claim.v1 import task_pb2 as _task_pb2
from trainyard.job.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClaimTaskRequest(_message.Message):
    __slots__ = ("machine", "platform", "bases", "devices", "supports", "wait", "body")
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    BASES_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    machine: str
    platform: bool
    bases: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    supports: _task_pb2.Supports
    wait: int
    body: _struct_pb2.Struct
    def __init__(self, machine: _Optional[str] = ..., platform: _Optional[bool] = ..., bases: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., supports: _Optional[_Union[_task_pb2.Supports, _Mapping]] = ..., wait: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ClaimTaskResponse(_message.Message):
    __slots__ = ("org", "task", "job")
    ORG_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    org: str
    task: _task_pb2.Task
    job: _job_pb2.Job
    def __init__(self, org: _Optional[str] = ..., task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ReportTaskRequest(_message.Message):
    __slots__ = ("id", "task", "lease", "events", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    task: str
    lease: str
    events: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskEvent]
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., task: _Optional[str] = ..., lease: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_task_pb2.TaskEvent, _Mapping]]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReportTaskResponse(_message.Message):
    __slots__ = ("cancel", "held", "status", "seq")
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    cancel: bool
    held: int
    status: str
    seq: int
    def __init__(self, cancel: _Optional[bool] = ..., held: _Optional[int] = ..., status: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class RegisterTaskArtifactRequest(_message.Message):
    __slots__ = ("id", "task", "lease", "kind", "name", "sha256", "size", "meta", "body")
    class MetaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    task: str
    lease: str
    kind: str
    name: str
    sha256: str
    size: int
    meta: _containers.ScalarMap[str, str]
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., task: _Optional[str] = ..., lease: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., sha256: _Optional[str] = ..., size: _Optional[int] = ..., meta: _Optional[_Mapping[str, str]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("hello", "report", "artifact", "release", "result", "announcement")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ANNOUNCEMENT_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    report: StreamReport
    artifact: ArtifactRegistration
    release: Release
    result: OperationResult
    announcement: Announcement
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., report: _Optional[_Union[StreamReport, _Mapping]] = ..., artifact: _Optional[_Union[ArtifactRegistration, _Mapping]] = ..., release: _Optional[_Union[Release, _Mapping]] = ..., result: _Optional[_Union[OperationResult, _Mapping]] = ..., announcement: _Optional[_Union[Announcement, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("assignment", "ack", "cancel", "grant", "welcome", "operation")
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    assignment: Assignment
    ack: Ack
    cancel: Cancel
    grant: StreamGrant
    welcome: Welcome
    operation: ClientOperation
    def __init__(self, assignment: _Optional[_Union[Assignment, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., grant: _Optional[_Union[StreamGrant, _Mapping]] = ..., welcome: _Optional[_Union[Welcome, _Mapping]] = ..., operation: _Optional[_Union[ClientOperation, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("machine", "platform", "bases", "devices", "supports", "leases", "slots", "clients", "abandoned", "previous")
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    BASES_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    machine: str
    platform: bool
    bases: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    supports: _task_pb2.Supports
    leases: _containers.RepeatedCompositeFieldContainer[HeldLease]
    slots: int
    clients: int
    abandoned: _containers.RepeatedCompositeFieldContainer[HeldLease]
    previous: str
    def __init__(self, machine: _Optional[str] = ..., platform: _Optional[bool] = ..., bases: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., supports: _Optional[_Union[_task_pb2.Supports, _Mapping]] = ..., leases: _Optional[_Iterable[_Union[HeldLease, _Mapping]]] = ..., slots: _Optional[int] = ..., clients: _Optional[int] = ..., abandoned: _Optional[_Iterable[_Union[HeldLease, _Mapping]]] = ..., previous: _Optional[str] = ...) -> None: ...

class Announcement(_message.Message):
    __slots__ = ("bases",)
    BASES_FIELD_NUMBER: _ClassVar[int]
    bases: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, bases: _Optional[_Iterable[str]] = ...) -> None: ...

class HeldLease(_message.Message):
    __slots__ = ("task", "lease")
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    task: str
    lease: str
    def __init__(self, task: _Optional[str] = ..., lease: _Optional[str] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("executor_id", "resumed", "lost")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    resumed: _containers.RepeatedScalarFieldContainer[str]
    lost: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, executor_id: _Optional[str] = ..., resumed: _Optional[_Iterable[str]] = ..., lost: _Optional[_Iterable[str]] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("org", "task", "job")
    ORG_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    org: str
    task: _task_pb2.Task
    job: _job_pb2.Job
    def __init__(self, org: _Optional[str] = ..., task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class StreamReport(_message.Message):
    __slots__ = ("task", "lease", "events")
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    task: str
    lease: str
    events: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskEvent]
    def __init__(self, task: _Optional[str] = ..., lease: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_task_pb2.TaskEvent, _Mapping]]] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("task", "seq", "held", "cancel", "status", "reason")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task: str
    seq: int
    held: int
    cancel: bool
    status: str
    reason: str
    def __init__(self, task: _Optional[str] = ..., seq: _Optional[int] = ..., held: _Optional[int] = ..., cancel: _Optional[bool] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("task", "grace", "reason")
    TASK_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task: str
    grace: int
    reason: str
    def __init__(self, task: _Optional[str] = ..., grace: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ArtifactRegistration(_message.Message):
    __slots__ = ("request_id", "task", "lease", "kind", "name", "sha256", "size", "meta")
    class MetaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    task: str
    lease: str
    kind: str
    name: str
    sha256: str
    size: int
    meta: _containers.ScalarMap[str, str]
    def __init__(self, request_id: _Optional[str] = ..., task: _Optional[str] = ..., lease: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., sha256: _Optional[str] = ..., size: _Optional[int] = ..., meta: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StreamGrant(_message.Message):
    __slots__ = ("request_id", "grant", "reason")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    grant: _artifact_pb2.Grant
    reason: str
    def __init__(self, request_id: _Optional[str] = ..., grant: _Optional[_Union[_artifact_pb2.Grant, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class Release(_message.Message):
    __slots__ = ("task", "lease", "reason")
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task: str
    lease: str
    reason: str
    def __init__(self, task: _Optional[str] = ..., lease: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReadTaskInputRequest(_message.Message):
    __slots__ = ("id", "task", "lease", "sha256", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    task: str
    lease: str
    sha256: str
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., task: _Optional[str] = ..., lease: _Optional[str] = ..., sha256: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ClientOperation(_message.Message):
    __slots__ = ("client", "seq", "kind", "input", "lease", "org", "report")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    ORG_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    client: str
    seq: int
    kind: str
    input: str
    lease: str
    org: str
    report: int
    def __init__(self, client: _Optional[str] = ..., seq: _Optional[int] = ..., kind: _Optional[str] = ..., input: _Optional[str] = ..., lease: _Optional[str] = ..., org: _Optional[str] = ..., report: _Optional[int] = ...) -> None: ...

class OperationResult(_message.Message):
    __slots__ = ("client", "lease", "seq", "ok", "output", "code", "message", "field", "seconds")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    client: str
    lease: str
    seq: int
    ok: bool
    output: str
    code: str
    message: str
    field: str
    seconds: float
    def __init__(self, client: _Optional[str] = ..., lease: _Optional[str] = ..., seq: _Optional[int] = ..., ok: _Optional[bool] = ..., output: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...
