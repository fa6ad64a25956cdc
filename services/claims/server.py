"""Composition root of the ClaimService process."""

from __future__ import annotations

import grpc

from services.claims.servicer import ClaimServicer
from services.core.auth import EXECUTORS
from services.core.config import Config
from services.core.server import Service, build
from services.core.store import Store
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc

FULL_NAME = claim_service_pb2.DESCRIPTOR.services_by_name["ClaimService"].full_name
ROLES: dict[str, frozenset[str]] = {
    "ClaimTask": EXECUTORS,
    "ReportTask": EXECUTORS,
    "RegisterTaskArtifact": EXECUTORS,
    "Connect": EXECUTORS,
}


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    def register(server: grpc.aio.Server, store: Store) -> None:
        claim_service_pb2_grpc.add_ClaimServiceServicer_to_server(ClaimServicer(), server)

    return build(
        config,
        name="claims",
        full_name=FULL_NAME,
        register=register,
        roles=ROLES,
        store=store,
        port=port,
    )
