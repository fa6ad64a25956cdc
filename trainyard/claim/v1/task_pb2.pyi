from trainyard.job.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Task(_message.Message):
    __slots__ = ("id", "job", "role", "lease", "coordinator", "device", "devices", "held", "report", "epoch", "rank", "world_size", "attempt_number", "resume_from", "resume_step", "snapshot")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    RESUME_FROM_FIELD_NUMBER: _ClassVar[int]
    RESUME_STEP_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    id: str
    job: str
    role: str
    lease: str
    coordinator: str
    device: str
    devices: int
    held: int
    report: int
    epoch: int
    rank: int
    world_size: int
    attempt_number: int
    resume_from: str
    resume_step: int
    snapshot: str
    def __init__(self, id: _Optional[str] = ..., job: _Optional[str] = ..., role: _Optional[str] = ..., lease: _Optional[str] = ..., coordinator: _Optional[str] = ..., device: _Optional[str] = ..., devices: _Optional[int] = ..., held: _Optional[int] = ..., report: _Optional[int] = ..., epoch: _Optional[int] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., attempt_number: _Optional[int] = ..., resume_from: _Optional[str] = ..., resume_step: _Optional[int] = ..., snapshot: _Optional[str] = ...) -> None: ...

class Supports(_message.Message):
    __slots__ = ("adaptations", "protect", "terms", "outputs")
    ADAPTATIONS_FIELD_NUMBER: _ClassVar[int]
    PROTECT_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    adaptations: _containers.RepeatedScalarFieldContainer[str]
    protect: _containers.RepeatedScalarFieldContainer[str]
    terms: _containers.RepeatedScalarFieldContainer[str]
    outputs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, adaptations: _Optional[_Iterable[str]] = ..., protect: _Optional[_Iterable[str]] = ..., terms: _Optional[_Iterable[str]] = ..., outputs: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskEvent(_message.Message):
    __slots__ = ("seq", "type", "status", "error", "addr", "name", "step", "value", "line", "sha256", "result", "text")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    type: str
    status: str
    error: str
    addr: str
    name: str
    step: int
    value: float
    line: str
    sha256: str
    result: TaskResult
    text: str
    def __init__(self, seq: _Optional[int] = ..., type: _Optional[str] = ..., status: _Optional[str] = ..., error: _Optional[str] = ..., addr: _Optional[str] = ..., name: _Optional[str] = ..., step: _Optional[int] = ..., value: _Optional[float] = ..., line: _Optional[str] = ..., sha256: _Optional[str] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class TaskResult(_message.Message):
    __slots__ = ("sha256", "base_sha256", "evaluation", "outcome", "step", "served_step", "dataset_sha256", "training_config_sha256", "checkpoint_sha256", "training_seconds", "checkpoint_step")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    BASE_SHA256_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SERVED_STEP_FIELD_NUMBER: _ClassVar[int]
    DATASET_SHA256_FIELD_NUMBER: _ClassVar[int]
    TRAINING_CONFIG_SHA256_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_SHA256_FIELD_NUMBER: _ClassVar[int]
    TRAINING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_STEP_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    base_sha256: str
    evaluation: _job_pb2.Evaluation
    outcome: _job_pb2.Outcome
    step: int
    served_step: int
    dataset_sha256: str
    training_config_sha256: str
    checkpoint_sha256: str
    training_seconds: float
    checkpoint_step: int
    def __init__(self, sha256: _Optional[str] = ..., base_sha256: _Optional[str] = ..., evaluation: _Optional[_Union[_job_pb2.Evaluation, _Mapping]] = ..., outcome: _Optional[_Union[_job_pb2.Outcome, _Mapping]] = ..., step: _Optional[int] = ..., served_step: _Optional[int] = ..., dataset_sha256: _Optional[str] = ..., training_config_sha256: _Optional[str] = ..., checkpoint_sha256: _Optional[str] = ..., training_seconds: _Optional[float] = ..., checkpoint_step: _Optional[int] = ...) -> None: ...
