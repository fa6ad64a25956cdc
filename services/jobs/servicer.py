"""JobService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

import grpc

from services.jobs.catalog import Catalog
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc


class JobServicer(job_service_pb2_grpc.JobServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    async def ListModels(
        self, request: job_service_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.ListModelsResponse:
        return job_service_pb2.ListModelsResponse(models=self._catalog.to_proto())
