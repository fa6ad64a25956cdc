"""Composition root of the MeterService process."""

from __future__ import annotations

import logging

import grpc

from services.core import keys, roles
from services.core.config import Config
from services.core.metrics import DeviceSeconds
from services.core.pagetoken import PageTokens
from services.core.server import Service, build
from services.core.store import Store
from services.meter.service import MeterService
from services.meter.servicer import MeterServicer
from trainyard.meter.v1 import meter_service_pb2, meter_service_pb2_grpc
from trainyard.training.catalog import Catalog

FULL_NAME = meter_service_pb2.DESCRIPTOR.services_by_name["MeterService"].full_name
ROLES = roles.for_service(FULL_NAME)

log = logging.getLogger(__name__)


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    holder: dict[str, MeterService] = {}

    def register(server: grpc.aio.Server, store: Store) -> None:
        tokens = PageTokens(keys.derive(config.master_key(), "page-tokens"))
        catalog = Catalog.discover(config.models_dir)
        service = MeterService(store, config, tokens, catalog)
        holder["service"] = service
        meter_service_pb2_grpc.add_MeterServiceServicer_to_server(MeterServicer(service), server)

    built = build(
        config,
        name="meter",
        full_name=FULL_NAME,
        register=register,
        roles=ROLES,
        store=store,
        port=port,
    )

    def accrue() -> str:
        payers, total = holder["service"].sweep_storage()
        return f"storage accrual charged {payers} payers {total} micro-cents"

    # Hourly by default, with the retention sweep.
    built.every(config.sweep_interval_seconds, accrue, "storage accrual")
    built.metrics.registry.register(DeviceSeconds(built.store))
    return built
