from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ProvenanceRecord(_message.Message):
    __slots__ = ("id", "job_id", "dataset_sha256", "artifact_sha256", "base_model_id", "base_model_sha256", "training_config_sha256", "created_at", "schema_version")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_SHA256_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_SHA256_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_SHA256_FIELD_NUMBER: _ClassVar[int]
    TRAINING_CONFIG_SHA256_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    job_id: str
    dataset_sha256: str
    artifact_sha256: str
    base_model_id: str
    base_model_sha256: str
    training_config_sha256: str
    created_at: str
    schema_version: int
    def __init__(self, id: _Optional[str] = ..., job_id: _Optional[str] = ..., dataset_sha256: _Optional[str] = ..., artifact_sha256: _Optional[str] = ..., base_model_id: _Optional[str] = ..., base_model_sha256: _Optional[str] = ..., training_config_sha256: _Optional[str] = ..., created_at: _Optional[str] = ..., schema_version: _Optional[int] = ...) -> None: ...
