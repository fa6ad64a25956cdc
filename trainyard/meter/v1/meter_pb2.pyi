import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
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
    __slots__ = ("payer", "balance_micro_cents", "held_micro_cents", "spend_cap_micro_cents", "spent_micro_cents")
    PAYER_FIELD_NUMBER: _ClassVar[int]
    BALANCE_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    HELD_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    SPEND_CAP_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    SPENT_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    payer: str
    balance_micro_cents: int
    held_micro_cents: int
    spend_cap_micro_cents: int
    spent_micro_cents: int
    def __init__(self, payer: _Optional[str] = ..., balance_micro_cents: _Optional[int] = ..., held_micro_cents: _Optional[int] = ..., spend_cap_micro_cents: _Optional[int] = ..., spent_micro_cents: _Optional[int] = ...) -> None: ...

class LedgerEntry(_message.Message):
    __slots__ = ("name", "payer", "kind", "micro_cents", "job_id", "quantity", "create_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    payer: str
    kind: str
    micro_cents: int
    job_id: str
    quantity: float
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., payer: _Optional[str] = ..., kind: _Optional[str] = ..., micro_cents: _Optional[int] = ..., job_id: _Optional[str] = ..., quantity: _Optional[float] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Hold(_message.Message):
    __slots__ = ("task_id", "job_id", "payer", "held_seconds", "used_seconds", "rate_micro_cents", "status")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAYER_FIELD_NUMBER: _ClassVar[int]
    HELD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RATE_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    job_id: str
    payer: str
    held_seconds: int
    used_seconds: int
    rate_micro_cents: int
    status: str
    def __init__(self, task_id: _Optional[str] = ..., job_id: _Optional[str] = ..., payer: _Optional[str] = ..., held_seconds: _Optional[int] = ..., used_seconds: _Optional[int] = ..., rate_micro_cents: _Optional[int] = ..., status: _Optional[str] = ...) -> None: ...
