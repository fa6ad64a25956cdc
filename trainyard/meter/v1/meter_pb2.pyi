import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Rate(_message.Message):
    __slots__ = ("meter", "micro_cents", "unit", "floor")
    METER_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    meter: str
    micro_cents: int
    unit: str
    floor: bool
    def __init__(self, meter: _Optional[str] = ..., micro_cents: _Optional[int] = ..., unit: _Optional[str] = ..., floor: _Optional[bool] = ...) -> None: ...

class Wallet(_message.Message):
    __slots__ = ("payer", "balance_micro_cents", "held_micro_cents", "spend_cap_micro_cents", "spent_micro_cents", "holds", "project_caps", "available_micro_cents", "storage_bytes", "storage_cost_per_month")
    PAYER_FIELD_NUMBER: _ClassVar[int]
    BALANCE_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    HELD_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    SPEND_CAP_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    SPENT_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_CAPS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_COST_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    payer: str
    balance_micro_cents: int
    held_micro_cents: int
    spend_cap_micro_cents: int
    spent_micro_cents: int
    holds: _containers.RepeatedCompositeFieldContainer[Hold]
    project_caps: _containers.RepeatedCompositeFieldContainer[SpendCap]
    available_micro_cents: int
    storage_bytes: int
    storage_cost_per_month: float
    def __init__(self, payer: _Optional[str] = ..., balance_micro_cents: _Optional[int] = ..., held_micro_cents: _Optional[int] = ..., spend_cap_micro_cents: _Optional[int] = ..., spent_micro_cents: _Optional[int] = ..., holds: _Optional[_Iterable[_Union[Hold, _Mapping]]] = ..., project_caps: _Optional[_Iterable[_Union[SpendCap, _Mapping]]] = ..., available_micro_cents: _Optional[int] = ..., storage_bytes: _Optional[int] = ..., storage_cost_per_month: _Optional[float] = ...) -> None: ...

class SpendCap(_message.Message):
    __slots__ = ("project", "micro_cents", "spent_micro_cents")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    SPENT_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    project: str
    micro_cents: int
    spent_micro_cents: int
    def __init__(self, project: _Optional[str] = ..., micro_cents: _Optional[int] = ..., spent_micro_cents: _Optional[int] = ...) -> None: ...

class LedgerEntry(_message.Message):
    __slots__ = ("name", "payer", "kind", "micro_cents", "job_id", "quantity", "create_time", "task_id", "project", "span")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SPAN_FIELD_NUMBER: _ClassVar[int]
    name: str
    payer: str
    kind: str
    micro_cents: int
    job_id: str
    quantity: float
    create_time: _timestamp_pb2.Timestamp
    task_id: str
    project: str
    span: str
    def __init__(self, name: _Optional[str] = ..., payer: _Optional[str] = ..., kind: _Optional[str] = ..., micro_cents: _Optional[int] = ..., job_id: _Optional[str] = ..., quantity: _Optional[float] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., task_id: _Optional[str] = ..., project: _Optional[str] = ..., span: _Optional[str] = ...) -> None: ...

class Hold(_message.Message):
    __slots__ = ("task_id", "job_id", "payer", "held_seconds", "used_seconds", "rate_micro_cents", "status", "devices", "charged_micro_cents", "refusal")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAYER_FIELD_NUMBER: _ClassVar[int]
    HELD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RATE_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    CHARGED_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    job_id: str
    payer: str
    held_seconds: int
    used_seconds: int
    rate_micro_cents: int
    status: str
    devices: int
    charged_micro_cents: int
    refusal: str
    def __init__(self, task_id: _Optional[str] = ..., job_id: _Optional[str] = ..., payer: _Optional[str] = ..., held_seconds: _Optional[int] = ..., used_seconds: _Optional[int] = ..., rate_micro_cents: _Optional[int] = ..., status: _Optional[str] = ..., devices: _Optional[int] = ..., charged_micro_cents: _Optional[int] = ..., refusal: _Optional[str] = ...) -> None: ...
