"""Composition root of the JobService process, which serves OrgService (an org's keys,
audit trail and limits) too."""

from __future__ import annotations

import asyncio
import logging

import grpc

from services.core import keys, roles
from services.core.clients import ArtifactReader
from services.core.config import Config
from services.core.metrics import JobsByState, SilentJobs
from services.core.pagetoken import PageTokens
from services.core.server import Service, build
from services.core.store import Store
from services.core.wakeups import queued_topic, woken
from services.jobs import sources
from services.jobs.control import JobControl
from services.jobs.create import JobCreation
from services.jobs.data_sources import DataSources, Sealer
from services.jobs.org.keys import Keys
from services.jobs.org.limits import OrgLimits
from services.jobs.org.servicer import OrgServicer
from services.jobs.org.trail import Trail
from services.jobs.preparation import Preparation
from services.jobs.publishing import Downloads, Publishing
from services.jobs.reads import JobReads
from services.jobs.service import JobService
from services.jobs.servicer import JobServicer, keepalive
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc
from trainyard.org.v1 import org_service_pb2, org_service_pb2_grpc
from trainyard.training.catalog import Catalog

log = logging.getLogger(__name__)

FULL_NAME = job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name
ORG = org_service_pb2.DESCRIPTOR.services_by_name["OrgService"].full_name
ROLES = roles.for_services(FULL_NAME, ORG)
IDLE_SECONDS = 0.5


def use_cases(
    store: Store,
    catalog: Catalog,
    config: Config,
    tokens: PageTokens,
    reader: sources.DatasetReader | None = None,
    snapshots: sources.SnapshotKeeper | None = None,
    downloads: Downloads | None = None,
) -> JobService:
    registered = DataSources(store, Sealer(config.master_key()))
    preparation = Preparation(store, reader, snapshots, catalog, config.retention_days, registered)
    return JobService(
        creation=JobCreation(store, catalog, config, reader, registered, preparation),
        reads=JobReads(store, tokens, catalog),
        control=JobControl(store, config, catalog),
        publishing=Publishing(store, downloads),
        preparation=preparation,
        data_sources=registered,
    )


def build_server(
    config: Config,
    *,
    store: Store | None = None,
    port: int | None = None,
    reader: sources.DatasetReader | None = None,
) -> Service:
    holder: dict[str, JobService] = {}

    def register(server: grpc.aio.Server, store: Store) -> None:
        tokens = PageTokens(keys.derive(config.master_key(), "page-tokens"))
        artifacts = ArtifactReader(config) if config.service_key else None
        source = reader if reader is not None else artifacts
        catalog = Catalog.discover(config.models_dir, hash_ahead=True)
        service = use_cases(store, catalog, config, tokens, source, artifacts, artifacts)
        holder["service"] = service
        job_service_pb2_grpc.add_JobServiceServicer_to_server(
            JobServicer(
                service,
                catalog,
                store.wakeups,
                keepalive_seconds=keepalive(config.gateway_idle_timeout_seconds),
            ),
            server,
        )
        org_keys = Keys(store, tokens)
        org_service_pb2_grpc.add_OrgServiceServicer_to_server(
            OrgServicer(org_keys, Trail(store, tokens), OrgLimits(store, config, org_keys)), server
        )

    built = build(
        config,
        name="jobs",
        full_name=FULL_NAME,
        also_serves=(ORG,),
        register=register,
        roles=ROLES,
        store=store,
        port=port,
        hears=("job", "queued"),  # the event long-polls and watches; preparation
    )

    async def prepare_forever(stopping: asyncio.Event) -> None:
        """Snapshot queued jobs' datasets; woken once a job enters the queue (a create or a
        retry, in any replica, committed), else every half second."""
        service = holder["service"]
        with built.store.wakeups.watching(queued_topic()) as queued:
            while not stopping.is_set():
                queued.clear()
                try:
                    busy = await asyncio.to_thread(service.preparation.prepare_next)
                except Exception:
                    log.exception("preparation pass failed")
                    busy = False
                if not busy:
                    await woken(queued, IDLE_SECONDS)

    built.background.append(prepare_forever)
    built.metrics.registry.register(JobsByState(built.store))
    built.metrics.registry.register(SilentJobs(built.store))
    return built
