from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from trainyard.job.v1 import attempt_pb2 as _attempt_pb2
from trainyard.job.v1 import data_source_pb2 as _data_source_pb2
from trainyard.job.v1 import event_pb2 as _event_pb2
from trainyard.job.v1 import job_pb2 as _job_pb2
from trainyard.job.v1 import model_pb2 as _model_pb2
from trainyard.job.v1 import publication_pb2 as _publication_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateDataSourceRequest(_message.Message):
    __slots__ = ("name", "endpoint", "region", "access_key_id", "secret_access_key", "body")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ACCESS_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    name: str
    endpoint: str
    region: str
    access_key_id: str
    secret_access_key: str
    body: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., endpoint: _Optional[str] = ..., region: _Optional[str] = ..., access_key_id: _Optional[str] = ..., secret_access_key: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListDataSourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDataSourcesResponse(_message.Message):
    __slots__ = ("data_sources",)
    DATA_SOURCES_FIELD_NUMBER: _ClassVar[int]
    data_sources: _containers.RepeatedCompositeFieldContainer[_data_source_pb2.DataSource]
    def __init__(self, data_sources: _Optional[_Iterable[_Union[_data_source_pb2.DataSource, _Mapping]]] = ...) -> None: ...

class DeleteDataSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteDataSourceResponse(_message.Message):
    __slots__ = ("name", "deleted")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    name: str
    deleted: bool
    def __init__(self, name: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class CreateJobRequest(_message.Message):
    __slots__ = ("job", "body")
    JOB_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    body: _struct_pb2.Struct
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("id", "identifier", "project")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    id: str
    identifier: str
    project: str
    def __init__(self, id: _Optional[str] = ..., identifier: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("status", "project", "page_size", "page_token")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    status: str
    project: str
    page_size: int
    page_token: str
    def __init__(self, status: _Optional[str] = ..., project: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token", "total_size")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    total_size: int
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RetryJobRequest(_message.Message):
    __slots__ = ("id", "idempotency_key", "resume_from_checkpoint", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    RESUME_FROM_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    idempotency_key: str
    resume_from_checkpoint: bool
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., resume_from_checkpoint: _Optional[bool] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RetryJobResponse(_message.Message):
    __slots__ = ("job", "attempt")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    attempt: _attempt_pb2.Attempt
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., attempt: _Optional[_Union[_attempt_pb2.Attempt, _Mapping]] = ...) -> None: ...

class PublishJobRequest(_message.Message):
    __slots__ = ("id", "name", "force", "route", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    force: bool
    route: _publication_pb2.Route
    body: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., force: _Optional[bool] = ..., route: _Optional[_Union[_publication_pb2.Route, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListJobEventsRequest(_message.Message):
    __slots__ = ("id", "after", "wait", "page_size")
    ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    id: str
    after: int
    wait: int
    page_size: int
    def __init__(self, id: _Optional[str] = ..., after: _Optional[int] = ..., wait: _Optional[int] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListJobEventsResponse(_message.Message):
    __slots__ = ("events", "next_after", "status")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_event_pb2.JobEvent]
    next_after: int
    status: str
    def __init__(self, events: _Optional[_Iterable[_Union[_event_pb2.JobEvent, _Mapping]]] = ..., next_after: _Optional[int] = ..., status: _Optional[str] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("id", "after")
    ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    id: str
    after: int
    def __init__(self, id: _Optional[str] = ..., after: _Optional[int] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ("job", "event", "caught_up")
    JOB_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    event: _event_pb2.JobEvent
    caught_up: bool
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., event: _Optional[_Union[_event_pb2.JobEvent, _Mapping]] = ..., caught_up: _Optional[bool] = ...) -> None: ...

class ListJobMetricsRequest(_message.Message):
    __slots__ = ("id", "names", "after_step", "max_points")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    AFTER_STEP_FIELD_NUMBER: _ClassVar[int]
    MAX_POINTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    names: _containers.RepeatedScalarFieldContainer[str]
    after_step: int
    max_points: int
    def __init__(self, id: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., after_step: _Optional[int] = ..., max_points: _Optional[int] = ...) -> None: ...

class ListJobMetricsResponse(_message.Message):
    __slots__ = ("series", "next_after")
    SERIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_FIELD_NUMBER: _ClassVar[int]
    series: _containers.RepeatedCompositeFieldContainer[_event_pb2.MetricSeries]
    next_after: int
    def __init__(self, series: _Optional[_Iterable[_Union[_event_pb2.MetricSeries, _Mapping]]] = ..., next_after: _Optional[int] = ...) -> None: ...

class ListJobAttemptsRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListJobAttemptsResponse(_message.Message):
    __slots__ = ("attempts",)
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_attempt_pb2.Attempt]
    def __init__(self, attempts: _Optional[_Iterable[_Union[_attempt_pb2.Attempt, _Mapping]]] = ...) -> None: ...

class GetAttemptLogRequest(_message.Message):
    __slots__ = ("id", "attempt", "tail_lines", "offset", "limit_bytes", "start_line", "max_lines", "wait")
    ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    MAX_LINES_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    attempt: str
    tail_lines: int
    offset: int
    limit_bytes: int
    start_line: int
    max_lines: int
    wait: int
    def __init__(self, id: _Optional[str] = ..., attempt: _Optional[str] = ..., tail_lines: _Optional[int] = ..., offset: _Optional[int] = ..., limit_bytes: _Optional[int] = ..., start_line: _Optional[int] = ..., max_lines: _Optional[int] = ..., wait: _Optional[int] = ...) -> None: ...

class AttemptLog(_message.Message):
    __slots__ = ("job_id", "attempt_number", "status", "text", "offset", "next_offset", "first_line", "size", "start", "complete")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FIRST_LINE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    attempt_number: int
    status: str
    text: str
    offset: int
    next_offset: int
    first_line: int
    size: int
    start: int
    complete: bool
    def __init__(self, job_id: _Optional[str] = ..., attempt_number: _Optional[int] = ..., status: _Optional[str] = ..., text: _Optional[str] = ..., offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., first_line: _Optional[int] = ..., size: _Optional[int] = ..., start: _Optional[int] = ..., complete: _Optional[bool] = ...) -> None: ...

class ListJobDatasetItemsRequest(_message.Message):
    __slots__ = ("id", "offset", "limit", "search", "split")
    ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    offset: int
    limit: int
    search: str
    split: str
    def __init__(self, id: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ..., search: _Optional[str] = ..., split: _Optional[str] = ...) -> None: ...

class ListJobDatasetItemsResponse(_message.Message):
    __slots__ = ("items", "total", "offset", "limit", "has_more", "next_offset", "search_applied", "split")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEARCH_APPLIED_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[_job_pb2.DatasetItem]
    total: int
    offset: int
    limit: int
    has_more: bool
    next_offset: int
    search_applied: bool
    split: str
    def __init__(self, items: _Optional[_Iterable[_Union[_job_pb2.DatasetItem, _Mapping]]] = ..., total: _Optional[int] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ..., has_more: _Optional[bool] = ..., next_offset: _Optional[int] = ..., search_applied: _Optional[bool] = ..., split: _Optional[str] = ...) -> None: ...

class GetJobDatasetItemRequest(_message.Message):
    __slots__ = ("id", "item")
    ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    id: str
    item: str
    def __init__(self, id: _Optional[str] = ..., item: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[_model_pb2.BaseModel]
    def __init__(self, models: _Optional[_Iterable[_Union[_model_pb2.BaseModel, _Mapping]]] = ...) -> None: ...

class EstimateJobRequest(_message.Message):
    __slots__ = ("job", "body")
    JOB_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    body: _struct_pb2.Struct
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class EstimateJobResponse(_message.Message):
    __slots__ = ("job", "dataset", "duration_components", "admitted", "expected", "authorization_ceiling", "device_class")
    JOB_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DURATION_COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_CEILING_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    dataset: DatasetStats
    duration_components: DurationComponents
    admitted: bool
    expected: Price
    authorization_ceiling: Price
    device_class: str
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., dataset: _Optional[_Union[DatasetStats, _Mapping]] = ..., duration_components: _Optional[_Union[DurationComponents, _Mapping]] = ..., admitted: _Optional[bool] = ..., expected: _Optional[_Union[Price, _Mapping]] = ..., authorization_ceiling: _Optional[_Union[Price, _Mapping]] = ..., device_class: _Optional[str] = ...) -> None: ...

class DatasetStats(_message.Message):
    __slots__ = ("selected_chats", "selected_messages", "trainable_chats", "nonempty_text_messages", "is_trainable", "reasons")
    SELECTED_CHATS_FIELD_NUMBER: _ClassVar[int]
    SELECTED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TRAINABLE_CHATS_FIELD_NUMBER: _ClassVar[int]
    NONEMPTY_TEXT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IS_TRAINABLE_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    selected_chats: int
    selected_messages: int
    trainable_chats: int
    nonempty_text_messages: int
    is_trainable: bool
    reasons: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, selected_chats: _Optional[int] = ..., selected_messages: _Optional[int] = ..., trainable_chats: _Optional[int] = ..., nonempty_text_messages: _Optional[int] = ..., is_trainable: _Optional[bool] = ..., reasons: _Optional[_Iterable[str]] = ...) -> None: ...

class DurationComponents(_message.Message):
    __slots__ = ("workload_seconds", "post_processing_tolerance_seconds", "projected_active_seconds", "execution_limit_seconds")
    WORKLOAD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    POST_PROCESSING_TOLERANCE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROJECTED_ACTIVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    workload_seconds: float
    post_processing_tolerance_seconds: float
    projected_active_seconds: float
    execution_limit_seconds: float
    def __init__(self, workload_seconds: _Optional[float] = ..., post_processing_tolerance_seconds: _Optional[float] = ..., projected_active_seconds: _Optional[float] = ..., execution_limit_seconds: _Optional[float] = ...) -> None: ...

class Price(_message.Message):
    __slots__ = ("device_seconds", "micro_cents")
    DEVICE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    device_seconds: float
    micro_cents: int
    def __init__(self, device_seconds: _Optional[float] = ..., micro_cents: _Optional[int] = ...) -> None: ...

class ListPublishedRequest(_message.Message):
    __slots__ = ("revision",)
    REVISION_FIELD_NUMBER: _ClassVar[int]
    revision: str
    def __init__(self, revision: _Optional[str] = ...) -> None: ...

class ListPublishedResponse(_message.Message):
    __slots__ = ("revision", "changed", "data")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    revision: str
    changed: bool
    data: _containers.RepeatedCompositeFieldContainer[_publication_pb2.Publication]
    def __init__(self, revision: _Optional[str] = ..., changed: _Optional[bool] = ..., data: _Optional[_Iterable[_Union[_publication_pb2.Publication, _Mapping]]] = ...) -> None: ...
