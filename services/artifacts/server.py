"""Composition root of the ArtifactService process."""

from __future__ import annotations

import logging

import grpc

from services.artifacts.backup import ObjectCopier
from services.artifacts.crypto import KeyWrap, OrgKeys
from services.artifacts.deletion import Deletion
from services.artifacts.downloads import DownloadTokens
from services.artifacts.grants import Grants
from services.artifacts.keeping import Keeping
from services.artifacts.objects import ObjectStore
from services.artifacts.provenance_records import ProvenanceRecords
from services.artifacts.reads import ArtifactReads
from services.artifacts.service import ArtifactService
from services.artifacts.servicer import ArtifactServicer
from services.core import keys, roles
from services.core.config import Config
from services.core.metrics import StoredBytes
from services.core.pagetoken import PageTokens
from services.core.server import Service, build
from services.core.store import Store, utcnow
from trainyard.artifact.v1 import artifact_service_pb2, artifact_service_pb2_grpc

log = logging.getLogger(__name__)

FULL_NAME = artifact_service_pb2.DESCRIPTOR.services_by_name["ArtifactService"].full_name
ROLES = roles.for_service(FULL_NAME)


def use_cases(
    store: Store,
    objects: ObjectStore,
    wrap: KeyWrap,
    config: Config,
    tokens: PageTokens,
    downloads: DownloadTokens,
) -> ArtifactService:
    keys = OrgKeys(wrap, utcnow)
    reads = ArtifactReads(store, objects, keys, tokens, downloads, utcnow)
    return ArtifactService(
        grants=Grants(store, objects, keys, config, reads, utcnow),
        reads=reads,
        provenance=ProvenanceRecords(store, utcnow),
        deletion=Deletion(store, objects, keys, utcnow),
        keeping=Keeping(store, reads, utcnow),
    )


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    holder: dict[str, ArtifactService] = {}

    def register(server: grpc.aio.Server, store: Store) -> None:
        master = config.master_key()
        service = use_cases(
            store,
            ObjectStore(config),
            KeyWrap(master),
            config,
            PageTokens(keys.derive(master, "page-tokens")),
            DownloadTokens(keys.derive(master, "download-tokens"), config.public_url),
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
        expired, lapsed = holder["service"].deletion.sweep()
        return f"retention sweep deleted {expired} expired objects and {lapsed} lapsed uploads"

    built.every(config.sweep_interval_seconds, sweep, "retention sweep")  # hourly by default
    built.metrics.registry.register(StoredBytes(built.store))
    return built


def object_copier(config: Config) -> ObjectCopier:
    """The operator's way to the deployment's objects (`trainyard backup` and `restore`):
    each read out sealed under its own key, and written back in."""
    return ObjectCopier(config)
