"""ArtifactService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from google.api import httpbody_pb2

from services.artifacts.service import ArtifactService
from services.core import context, errors, validation
from trainyard.artifact.v1 import (
    artifact_pb2,
    artifact_service_pb2,
    artifact_service_pb2_grpc,
    provenance_pb2,
)

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]
_DONE = object()
# What a download is served as: an object's bytes, whatever they hold.
DOWNLOAD_TYPE = "application/octet-stream"


def _required_job(job_id: str) -> str:
    if not job_id:
        raise errors.ValidationError("job_id", "is required")
    return job_id


class ArtifactServicer(artifact_service_pb2_grpc.ArtifactServiceServicer):
    def __init__(self, service: ArtifactService) -> None:
        self._service = service

    async def CreateArtifact(
        self, request: artifact_service_pb2.CreateArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Grant:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            lambda: self._service.grants.grant(
                context.principal(),
                kind=request.kind or "dataset",
                name=request.name,
                sha256=request.sha256,
                size=request.size,
                request_id=context.request_id.get(),
            )
        )

    async def GrantJobArtifact(
        self, request: artifact_service_pb2.GrantJobArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Grant:
        return await asyncio.to_thread(
            lambda: self._service.grants.grant(
                context.principal(),
                kind=request.kind,
                name=request.name,
                sha256=request.sha256,
                size=request.size,
                job_id=_required_job(request.job_id),
                meta=dict(request.meta),
                request_id=context.request_id.get(),
            )
        )

    async def ConfirmArtifact(
        self, request: artifact_service_pb2.ConfirmArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.grants.confirm, context.principal(), request.sha256
        )

    async def ConfirmJobArtifact(
        self, request: artifact_service_pb2.ConfirmJobArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        return await asyncio.to_thread(
            lambda: self._service.grants.confirm(
                context.principal(), request.sha256, job_id=request.job_id or "-"
            )
        )

    async def GetArtifact(
        self, request: artifact_service_pb2.GetArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        return await asyncio.to_thread(
            self._service.reads.describe, context.principal(), request.sha256
        )

    async def ListArtifacts(
        self, request: artifact_service_pb2.ListArtifactsRequest, ctx: Ctx
    ) -> artifact_service_pb2.ListArtifactsResponse:
        found, token, total = await asyncio.to_thread(
            lambda: self._service.reads.list_objects(
                context.principal(),
                kind=request.kind,
                size=request.page_size,
                token=request.page_token,
            )
        )
        return artifact_service_pb2.ListArtifactsResponse(
            artifacts=found, next_page_token=token, total_size=total
        )

    async def DeleteArtifact(
        self, request: artifact_service_pb2.DeleteArtifactRequest, ctx: Ctx
    ) -> artifact_service_pb2.DeleteArtifactResponse:
        cascaded = await asyncio.to_thread(
            lambda: self._service.deletion.delete(
                context.principal(), request.sha256, request_id=context.request_id.get()
            )
        )
        return artifact_service_pb2.DeleteArtifactResponse(
            sha256=request.sha256, deleted=True, cascaded=cascaded
        )

    async def PinArtifact(
        self, request: artifact_service_pb2.PinArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            lambda: self._service.keeping.pin(
                context.principal(), request.sha256, request_id=context.request_id.get()
            )
        )

    async def UnpinArtifact(
        self, request: artifact_service_pb2.UnpinArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            lambda: self._service.keeping.unpin(
                context.principal(), request.sha256, request_id=context.request_id.get()
            )
        )

    async def ExtendArtifact(
        self, request: artifact_service_pb2.ExtendArtifactRequest, ctx: Ctx
    ) -> artifact_pb2.Artifact:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            lambda: self._service.keeping.extend(
                context.principal(),
                request.sha256,
                request.ttl_seconds,
                request_id=context.request_id.get(),
            )
        )

    async def ListJobArtifacts(
        self, request: artifact_service_pb2.ListJobArtifactsRequest, ctx: Ctx
    ) -> artifact_service_pb2.ListJobArtifactsResponse:
        found = await asyncio.to_thread(
            self._service.reads.list_job_artifacts, context.principal(), request.id
        )
        return artifact_service_pb2.ListJobArtifactsResponse(artifacts=found)

    async def DeleteJobArtifact(
        self, request: artifact_service_pb2.DeleteJobArtifactRequest, ctx: Ctx
    ) -> artifact_service_pb2.DeleteJobArtifactResponse:
        cascaded = await asyncio.to_thread(
            lambda: self._service.deletion.delete(
                context.principal(),
                request.sha256,
                job_id=request.id,
                request_id=context.request_id.get(),
            )
        )
        return artifact_service_pb2.DeleteJobArtifactResponse(
            sha256=request.sha256, deleted=True, cascaded=cascaded
        )

    async def GetJobProvenance(
        self, request: artifact_service_pb2.GetJobProvenanceRequest, ctx: Ctx
    ) -> provenance_pb2.ProvenanceRecord:
        return await asyncio.to_thread(
            self._service.provenance.of_job, context.principal(), request.id
        )

    async def RecordProvenance(
        self, request: artifact_service_pb2.RecordProvenanceRequest, ctx: Ctx
    ) -> provenance_pb2.ProvenanceRecord:
        return await asyncio.to_thread(
            self._service.provenance.record, context.principal(), request.record
        )

    async def ReadArtifact(
        self, request: artifact_service_pb2.ReadArtifactRequest, ctx: Ctx
    ) -> AsyncIterator[artifact_service_pb2.ReadArtifactResponse]:
        chunks = await asyncio.to_thread(
            self._service.reads.read, context.principal(), request.sha256
        )
        while (chunk := await asyncio.to_thread(next, chunks, _DONE)) is not _DONE:
            yield artifact_service_pb2.ReadArtifactResponse(data=chunk)  # type: ignore[arg-type]

    async def DownloadArtifact(
        self, request: artifact_service_pb2.DownloadArtifactRequest, ctx: Ctx
    ) -> AsyncIterator[httpbody_pb2.HttpBody]:
        chunks = await asyncio.to_thread(self._service.reads.download, request.token)
        while (chunk := await asyncio.to_thread(next, chunks, _DONE)) is not _DONE:
            yield httpbody_pb2.HttpBody(content_type=DOWNLOAD_TYPE, data=chunk)  # type: ignore[arg-type]

    async def SweepArtifacts(
        self, request: artifact_service_pb2.SweepArtifactsRequest, ctx: Ctx
    ) -> artifact_service_pb2.SweepArtifactsResponse:
        expired, lapsed = await asyncio.to_thread(self._service.deletion.sweep)
        return artifact_service_pb2.SweepArtifactsResponse(expired=expired, lapsed=lapsed)
