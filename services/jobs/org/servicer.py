"""OrgService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

import asyncio
from typing import TypeAlias

import grpc

from services.core import context, validation
from services.jobs.org.keys import Keys
from services.jobs.org.limits import OrgLimits
from services.jobs.org.trail import Trail
from trainyard.org.v1 import key_pb2, limits_pb2, org_service_pb2, org_service_pb2_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]


class OrgServicer(org_service_pb2_grpc.OrgServiceServicer):
    def __init__(self, keys: Keys, trail: Trail, limits: OrgLimits) -> None:
        self._keys = keys
        self._trail = trail
        self._limits = limits

    async def CreateKey(
        self, request: org_service_pb2.CreateKeyRequest, ctx: Ctx
    ) -> key_pb2.ApiKey:
        request = validation.read_body(request)
        return await asyncio.to_thread(self._keys.create, context.principal(), request)

    async def ListKeys(
        self, request: org_service_pb2.ListKeysRequest, ctx: Ctx
    ) -> org_service_pb2.ListKeysResponse:
        keys, token, total = await asyncio.to_thread(
            self._keys.list,
            context.principal(),
            size=request.page_size,
            token=request.page_token,
        )
        return org_service_pb2.ListKeysResponse(keys=keys, next_page_token=token, total_size=total)

    async def GetKey(self, request: org_service_pb2.GetKeyRequest, ctx: Ctx) -> key_pb2.ApiKey:
        return await asyncio.to_thread(self._keys.get, context.principal(), request.id)

    async def RevokeKey(
        self, request: org_service_pb2.RevokeKeyRequest, ctx: Ctx
    ) -> key_pb2.ApiKey:
        request = validation.read_body(request)
        return await asyncio.to_thread(self._keys.revoke, context.principal(), request.id)

    async def RotateKey(
        self, request: org_service_pb2.RotateKeyRequest, ctx: Ctx
    ) -> key_pb2.ApiKey:
        request = validation.read_body(request)
        return await asyncio.to_thread(self._keys.rotate, context.principal(), request.id)

    async def ListAuditEntries(
        self, request: org_service_pb2.ListAuditEntriesRequest, ctx: Ctx
    ) -> org_service_pb2.ListAuditEntriesResponse:
        entries, token = await asyncio.to_thread(
            self._trail.list,
            context.principal(),
            actor=request.actor,
            action=request.action,
            start_time=request.start_time,
            end_time=request.end_time,
            size=request.page_size,
            token=request.page_token,
        )
        return org_service_pb2.ListAuditEntriesResponse(entries=entries, next_page_token=token)

    async def GetLimits(
        self, request: org_service_pb2.GetLimitsRequest, ctx: Ctx
    ) -> limits_pb2.Limits:
        return await asyncio.to_thread(self._limits.read, context.principal())
