"""Composition root of the ClaimService process."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

import grpc

from services.claims.clients.servicer import ClientServicer
from services.claims.service import ClaimService
from services.claims.servicer import ClaimServicer
from services.core import keys, roles
from services.core.clients import ArtifactClient
from services.core.config import Config
from services.core.metrics import ClaimMetrics, Metrics
from services.core.pagetoken import PageTokens
from services.core.server import Service, build
from services.core.store import Store
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc
from trainyard.client.v1 import client_service_pb2, client_service_pb2_grpc
from trainyard.training.catalog import Catalog

log = logging.getLogger(__name__)

FULL_NAME = claim_service_pb2.DESCRIPTOR.services_by_name["ClaimService"].full_name
# The training clients' calls travel on the executors' streams this process holds.
CLIENTS = client_service_pb2.DESCRIPTOR.services_by_name["ClientService"].full_name
ROLES = roles.for_services(FULL_NAME, CLIENTS)


def roles_of(config: Config) -> Mapping[str, frozenset[str]]:
    """The table, with an org's users creating their own clients when the deployment
    lets them (`train_clients_by_members`)."""
    if not config.train_clients_by_members:
        return ROLES
    return MappingProxyType({**ROLES, "CreateTrainingClient": roles.ORG_USERS})


def build_server(
    config: Config,
    *,
    store: Store | None = None,
    port: int | None = None,
    poll_seconds: float = 5.0,
) -> Service:
    """`poll_seconds`: how often a waiting claim reads again when no wake-up came."""
    holder: dict[str, ClaimService] = {}
    metrics = Metrics()

    def register(server: grpc.aio.Server, store: Store) -> None:
        artifacts = ArtifactClient(config) if config.service_key else None
        service = ClaimService(
            store,
            config,
            artifacts,
            Catalog.discover(config.models_dir),
            metrics=ClaimMetrics(metrics.registry),
        )
        holder["service"] = service
        claim_service_pb2_grpc.add_ClaimServiceServicer_to_server(
            ClaimServicer(service, poll_seconds), server
        )
        tokens = PageTokens(keys.derive(config.master_key(), "page-tokens"))
        client_service_pb2_grpc.add_ClientServiceServicer_to_server(
            ClientServicer(service.clients, store.wakeups, tokens), server
        )

    built = build(
        config,
        name="claims",
        full_name=FULL_NAME,
        also_serves=(CLIENTS,),
        register=register,
        roles=roles_of(config),
        store=store,
        port=port,
        metrics=metrics,
        # Claimable tasks, cancels, training clients' calls and their answers.
        hears=("tasks", "executor", "operations", "future"),
    )

    def expire() -> str | None:
        lost = holder["service"].expire_leases()
        return f"{lost} leases lapsed" if lost else None

    # A few times per lease TTL.
    built.every(max(0.5, min(5.0, config.lease_ttl_seconds / 4)), expire, "lease sweep")
    return built
