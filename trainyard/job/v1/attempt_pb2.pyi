import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Attempt(_message.Message):
    __slots__ = ("id", "job_id", "attempt_number", "status", "resume_from_checkpoint", "resume_step", "failure_code", "failure_category", "failure_message", "create_time", "leased_time", "started_time", "finalizing_time", "end_time", "log_bytes")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESUME_FROM_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    RESUME_STEP_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LEASED_TIME_FIELD_NUMBER: _ClassVar[int]
    STARTED_TIME_FIELD_NUMBER: _ClassVar[int]
    FINALIZING_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    id: str
    job_id: str
    attempt_number: int
    status: str
    resume_from_checkpoint: bool
    resume_step: int
    failure_code: str
    failure_category: str
    failure_message: str
    create_time: _timestamp_pb2.Timestamp
    leased_time: _timestamp_pb2.Timestamp
    started_time: _timestamp_pb2.Timestamp
    finalizing_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    log_bytes: int
    def __init__(self, id: _Optional[str] = ..., job_id: _Optional[str] = ..., attempt_number: _Optional[int] = ..., status: _Optional[str] = ..., resume_from_checkpoint: _Optional[bool] = ..., resume_step: _Optional[int] = ..., failure_code: _Optional[str] = ..., failure_category: _Optional[str] = ..., failure_message: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., leased_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finalizing_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., log_bytes: _Optional[int] = ...) -> None: ...
