from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from trainyard.meter.v1 import meter_pb2 as _meter_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListRatesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRatesResponse(_message.Message):
    __slots__ = ("rates",)
    RATES_FIELD_NUMBER: _ClassVar[int]
    rates: _containers.RepeatedCompositeFieldContainer[_meter_pb2.Rate]
    def __init__(self, rates: _Optional[_Iterable[_Union[_meter_pb2.Rate, _Mapping]]] = ...) -> None: ...

class SetRateRequest(_message.Message):
    __slots__ = ("meter", "micro_cents", "body")
    METER_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    meter: str
    micro_cents: int
    body: _struct_pb2.Struct
    def __init__(self, meter: _Optional[str] = ..., micro_cents: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetWalletRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreditWalletRequest(_message.Message):
    __slots__ = ("payer", "micro_cents", "name", "body")
    PAYER_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    payer: str
    micro_cents: int
    name: str
    body: _struct_pb2.Struct
    def __init__(self, payer: _Optional[str] = ..., micro_cents: _Optional[int] = ..., name: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SetSpendCapRequest(_message.Message):
    __slots__ = ("project", "micro_cents", "body")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    project: str
    micro_cents: int
    body: _struct_pb2.Struct
    def __init__(self, project: _Optional[str] = ..., micro_cents: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListLedgerEntriesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListLedgerEntriesResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_meter_pb2.LedgerEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[_meter_pb2.LedgerEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class EstimatePriceRequest(_message.Message):
    __slots__ = ("base_model", "device_class", "device_seconds", "platform")
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    base_model: str
    device_class: str
    device_seconds: float
    platform: bool
    def __init__(self, base_model: _Optional[str] = ..., device_class: _Optional[str] = ..., device_seconds: _Optional[float] = ..., platform: _Optional[bool] = ...) -> None: ...

class EstimatePriceResponse(_message.Message):
    __slots__ = ("micro_cents", "rate")
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    micro_cents: int
    rate: _meter_pb2.Rate
    def __init__(self, micro_cents: _Optional[int] = ..., rate: _Optional[_Union[_meter_pb2.Rate, _Mapping]] = ...) -> None: ...

class SweepStorageRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SweepStorageResponse(_message.Message):
    __slots__ = ("payers", "micro_cents")
    PAYERS_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    payers: int
    micro_cents: int
    def __init__(self, payers: _Optional[int] = ..., micro_cents: _Optional[int] = ...) -> None: ...
