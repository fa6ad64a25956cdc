"""WebhookService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

import asyncio
from typing import TypeAlias

import grpc

from services.core import context, validation
from services.meter.webhooks.service import WebhookService
from trainyard.webhook.v1 import webhook_pb2, webhook_service_pb2, webhook_service_pb2_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]


class WebhookServicer(webhook_service_pb2_grpc.WebhookServiceServicer):
    def __init__(self, service: WebhookService) -> None:
        self._service = service

    async def CreateWebhook(
        self, request: webhook_service_pb2.CreateWebhookRequest, ctx: Ctx
    ) -> webhook_pb2.Webhook:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.create, context.principal(), request, context.request_id.get()
        )

    async def ListWebhooks(
        self, request: webhook_service_pb2.ListWebhooksRequest, ctx: Ctx
    ) -> webhook_service_pb2.ListWebhooksResponse:
        found, token = await asyncio.to_thread(
            lambda: self._service.webhooks(
                context.principal(), size=request.page_size, token=request.page_token
            )
        )
        return webhook_service_pb2.ListWebhooksResponse(webhooks=found, next_page_token=token)

    async def GetWebhook(
        self, request: webhook_service_pb2.GetWebhookRequest, ctx: Ctx
    ) -> webhook_pb2.Webhook:
        return await asyncio.to_thread(self._service.get, context.principal(), request.id)

    async def DeleteWebhook(
        self, request: webhook_service_pb2.DeleteWebhookRequest, ctx: Ctx
    ) -> webhook_service_pb2.DeleteWebhookResponse:
        deleted = await asyncio.to_thread(
            self._service.delete, context.principal(), request.id, context.request_id.get()
        )
        return webhook_service_pb2.DeleteWebhookResponse(id=request.id, deleted=deleted)

    async def ListWebhookDeliveries(
        self, request: webhook_service_pb2.ListWebhookDeliveriesRequest, ctx: Ctx
    ) -> webhook_service_pb2.ListWebhookDeliveriesResponse:
        found, token = await asyncio.to_thread(
            lambda: self._service.deliveries(
                context.principal(), request.id, size=request.page_size, token=request.page_token
            )
        )
        return webhook_service_pb2.ListWebhookDeliveriesResponse(
            deliveries=found, next_page_token=token
        )

    async def RedeliverWebhookDelivery(
        self, request: webhook_service_pb2.RedeliverWebhookDeliveryRequest, ctx: Ctx
    ) -> webhook_pb2.Delivery:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.redeliver,
            context.principal(),
            request.id,
            request.delivery_id,
            context.request_id.get(),
        )
