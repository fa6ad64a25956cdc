"""Composition root of the JobService process."""

from __future__ import annotations

import grpc

from services.core.auth import ADMIN, PLATFORM
from services.core.config import Config
from services.core.server import Service, build
from services.core.store import Store
from services.jobs.catalog import Catalog
from services.jobs.servicer import JobServicer
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

FULL_NAME = job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name
ROLES = {"ListPublished": PLATFORM, "CreateTrainingClient": ADMIN}


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    def register(server: grpc.aio.Server, store: Store) -> None:
        job_service_pb2_grpc.add_JobServiceServicer_to_server(JobServicer(Catalog()), server)

    return build(
        config,
        name="jobs",
        full_name=FULL_NAME,
        register=register,
        roles=ROLES,
        store=store,
        port=port,
    )
