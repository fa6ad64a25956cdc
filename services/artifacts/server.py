"""Composition root of the ArtifactService process."""

from __future__ import annotations

import grpc

from services.artifacts.servicer import ArtifactServicer
from services.core.auth import ADMIN, PLATFORM
from services.core.config import Config
from services.core.server import Service, build
from services.core.store import Store
from trainyard.artifact.v1 import artifact_service_pb2, artifact_service_pb2_grpc

FULL_NAME = artifact_service_pb2.DESCRIPTOR.services_by_name["ArtifactService"].full_name
ROLES: dict[str, frozenset[str]] = {
    "GrantJobArtifact": PLATFORM,
    "ConfirmJobArtifact": PLATFORM,
    "ReadArtifact": PLATFORM,
    "RecordProvenance": PLATFORM,
    "SweepArtifacts": ADMIN,
}


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    def register(server: grpc.aio.Server, store: Store) -> None:
        artifact_service_pb2_grpc.add_ArtifactServiceServicer_to_server(ArtifactServicer(), server)

    return build(
        config,
        name="artifacts",
        full_name=FULL_NAME,
        register=register,
        roles=ROLES,
        store=store,
        port=port,
    )
