"""Composition root of the ArtifactService process."""

from __future__ import annotations

import logging

import grpc

from services.artifacts.crypto import KeyWrap
from services.artifacts.objects import ObjectStore
from services.artifacts.service import ArtifactService
from services.artifacts.servicer import ArtifactServicer
from services.core import keys, roles
from services.core.config import Config
from services.core.metrics import StoredBytes
from services.core.pagetoken import PageTokens
from services.core.server import Service, build
from services.core.store import Store
from trainyard.artifact.v1 import artifact_service_pb2, artifact_service_pb2_grpc

log = logging.getLogger(__name__)

FULL_NAME = artifact_service_pb2.DESCRIPTOR.services_by_name["ArtifactService"].full_name
ROLES = roles.for_service(FULL_NAME)


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    holder: dict[str, ArtifactService] = {}

    def register(server: grpc.aio.Server, store: Store) -> None:
        master = config.master_key()
        service = ArtifactService(
            store,
            ObjectStore(config),
            KeyWrap(master),
            config,
            PageTokens(keys.derive(master, "page-tokens")),
        )
        holder["service"] = service
        artifact_service_pb2_grpc.add_ArtifactServiceServicer_to_server(
            ArtifactServicer(service), server
        )

    built = build(
        config,
        name="artifacts",
        full_name=FULL_NAME,
        register=register,
        roles=ROLES,
        store=store,
        port=port,
    )

    def sweep() -> str:
        expired, lapsed = holder["service"].sweep()
        return f"retention sweep deleted {expired} expired objects and {lapsed} lapsed uploads"

    built.every(config.sweep_interval_seconds, sweep, "retention sweep")  # hourly by default
    built.metrics.registry.register(StoredBytes(built.store))
    return built
