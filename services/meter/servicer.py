"""MeterService over gRPC: proto in, domain call, proto out. Holds and charges have no
methods here: claims and reports hold, charge and release inside their own transactions
(`services.core.money`)."""

from __future__ import annotations

import asyncio
from typing import TypeAlias

import grpc

from services.core import context, validation
from services.meter.service import MeterService
from trainyard.meter.v1 import meter_pb2, meter_service_pb2, meter_service_pb2_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]


class MeterServicer(meter_service_pb2_grpc.MeterServiceServicer):
    def __init__(self, service: MeterService) -> None:
        self._service = service

    async def ListRates(
        self, request: meter_service_pb2.ListRatesRequest, ctx: Ctx
    ) -> meter_service_pb2.ListRatesResponse:
        found = await asyncio.to_thread(self._service.list_rates)
        return meter_service_pb2.ListRatesResponse(rates=found)

    async def SetRate(self, request: meter_service_pb2.SetRateRequest, ctx: Ctx) -> meter_pb2.Rate:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.set_rate, context.principal(), request.meter, request.micro_cents
        )

    async def GetWallet(
        self, request: meter_service_pb2.GetWalletRequest, ctx: Ctx
    ) -> meter_pb2.Wallet:
        return await asyncio.to_thread(self._service.wallet, context.principal())

    async def CreditWallet(
        self, request: meter_service_pb2.CreditWalletRequest, ctx: Ctx
    ) -> meter_pb2.Wallet:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.credit,
            context.principal(),
            request.payer,
            request.micro_cents,
            request.name,
        )

    async def SetSpendCap(
        self, request: meter_service_pb2.SetSpendCapRequest, ctx: Ctx
    ) -> meter_pb2.Wallet:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.set_cap, context.principal(), request.project, request.micro_cents
        )

    async def ListLedgerEntries(
        self, request: meter_service_pb2.ListLedgerEntriesRequest, ctx: Ctx
    ) -> meter_service_pb2.ListLedgerEntriesResponse:
        entries, token = await asyncio.to_thread(
            lambda: self._service.entries(
                context.principal(), size=request.page_size, token=request.page_token
            )
        )
        return meter_service_pb2.ListLedgerEntriesResponse(entries=entries, next_page_token=token)

    async def SweepStorage(
        self, request: meter_service_pb2.SweepStorageRequest, ctx: Ctx
    ) -> meter_service_pb2.SweepStorageResponse:
        payers, total = await asyncio.to_thread(self._service.sweep_storage)
        return meter_service_pb2.SweepStorageResponse(payers=payers, micro_cents=total)

    async def EstimatePrice(
        self, request: meter_service_pb2.EstimatePriceRequest, ctx: Ctx
    ) -> meter_service_pb2.EstimatePriceResponse:
        amount, rate = await asyncio.to_thread(
            self._service.price,
            request.base_model,
            request.device_class,
            request.device_seconds,
            request.platform,
        )
        return meter_service_pb2.EstimatePriceResponse(micro_cents=amount, rate=rate)
