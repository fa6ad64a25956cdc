from trainyard.job.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BaseModel(_message.Message):
    __slots__ = ("name", "revision", "description", "parameters", "profile", "support")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    revision: str
    description: str
    parameters: float
    profile: ModelProfile
    support: SupportTable
    def __init__(self, name: _Optional[str] = ..., revision: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[float] = ..., profile: _Optional[_Union[ModelProfile, _Mapping]] = ..., support: _Optional[_Union[SupportTable, _Mapping]] = ...) -> None: ...

class ModelProfile(_message.Message):
    __slots__ = ("defaults", "adaptation", "objective", "output", "ranges", "zero_stage", "duration")
    DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ZERO_STAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    defaults: _job_pb2.Hyperparameters
    adaptation: _job_pb2.Adaptation
    objective: _job_pb2.Objective
    output: _job_pb2.Output
    ranges: _containers.RepeatedCompositeFieldContainer[FieldRange]
    zero_stage: int
    duration: DurationModel
    def __init__(self, defaults: _Optional[_Union[_job_pb2.Hyperparameters, _Mapping]] = ..., adaptation: _Optional[_Union[_job_pb2.Adaptation, _Mapping]] = ..., objective: _Optional[_Union[_job_pb2.Objective, _Mapping]] = ..., output: _Optional[_Union[_job_pb2.Output, _Mapping]] = ..., ranges: _Optional[_Iterable[_Union[FieldRange, _Mapping]]] = ..., zero_stage: _Optional[int] = ..., duration: _Optional[_Union[DurationModel, _Mapping]] = ...) -> None: ...

class FieldRange(_message.Message):
    __slots__ = ("field", "min", "max")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    field: str
    min: float
    max: float
    def __init__(self, field: _Optional[str] = ..., min: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class DurationModel(_message.Message):
    __slots__ = ("fixed_seconds", "reference_seq_length", "reference_step_seconds", "step_seconds_per_token")
    FIXED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_STEP_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STEP_SECONDS_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    fixed_seconds: float
    reference_seq_length: int
    reference_step_seconds: float
    step_seconds_per_token: float
    def __init__(self, fixed_seconds: _Optional[float] = ..., reference_seq_length: _Optional[int] = ..., reference_step_seconds: _Optional[float] = ..., step_seconds_per_token: _Optional[float] = ...) -> None: ...

class SupportTable(_message.Message):
    __slots__ = ("adaptations", "protect", "terms", "outputs", "datasets", "devices", "loss_masks", "base_load_precisions", "evaluation_suites", "targets", "nouns", "machines", "default_targets", "mixed_precisions", "zero_stages", "options")
    ADAPTATIONS_FIELD_NUMBER: _ClassVar[int]
    PROTECT_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    LOSS_MASKS_FIELD_NUMBER: _ClassVar[int]
    BASE_LOAD_PRECISIONS_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_SUITES_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    NOUNS_FIELD_NUMBER: _ClassVar[int]
    MACHINES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TARGETS_FIELD_NUMBER: _ClassVar[int]
    MIXED_PRECISIONS_FIELD_NUMBER: _ClassVar[int]
    ZERO_STAGES_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    adaptations: _containers.RepeatedScalarFieldContainer[str]
    protect: _containers.RepeatedScalarFieldContainer[str]
    terms: _containers.RepeatedScalarFieldContainer[str]
    outputs: _containers.RepeatedScalarFieldContainer[str]
    datasets: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    loss_masks: _containers.RepeatedScalarFieldContainer[str]
    base_load_precisions: _containers.RepeatedScalarFieldContainer[str]
    evaluation_suites: _containers.RepeatedScalarFieldContainer[str]
    targets: _containers.RepeatedScalarFieldContainer[str]
    nouns: _containers.RepeatedScalarFieldContainer[str]
    machines: int
    default_targets: _containers.RepeatedScalarFieldContainer[str]
    mixed_precisions: _containers.RepeatedScalarFieldContainer[str]
    zero_stages: _containers.RepeatedScalarFieldContainer[int]
    options: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, adaptations: _Optional[_Iterable[str]] = ..., protect: _Optional[_Iterable[str]] = ..., terms: _Optional[_Iterable[str]] = ..., outputs: _Optional[_Iterable[str]] = ..., datasets: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., loss_masks: _Optional[_Iterable[str]] = ..., base_load_precisions: _Optional[_Iterable[str]] = ..., evaluation_suites: _Optional[_Iterable[str]] = ..., targets: _Optional[_Iterable[str]] = ..., nouns: _Optional[_Iterable[str]] = ..., machines: _Optional[int] = ..., default_targets: _Optional[_Iterable[str]] = ..., mixed_precisions: _Optional[_Iterable[str]] = ..., zero_stages: _Optional[_Iterable[int]] = ..., options: _Optional[_Iterable[str]] = ...) -> None: ...
