"""Composition root of the MeterService process, which serves WebhookService beside it
and runs the webhooks' delivery worker and scans as background tasks."""

from __future__ import annotations

import logging

import grpc

from services.core import keys, roles
from services.core.config import Config
from services.core.metrics import DeviceSeconds, WebhookDeliveries
from services.core.pagetoken import PageTokens
from services.core.server import Service, build
from services.core.store import Store
from services.meter.service import MeterService
from services.meter.servicer import MeterServicer
from services.meter.webhooks.delivery import Deliverer
from services.meter.webhooks.guard import Guard
from services.meter.webhooks.scans import Scans
from services.meter.webhooks.sealing import Sealer
from services.meter.webhooks.service import WebhookService
from services.meter.webhooks.servicer import WebhookServicer
from trainyard.meter.v1 import meter_service_pb2, meter_service_pb2_grpc
from trainyard.training.catalog import Catalog
from trainyard.webhook.v1 import webhook_service_pb2, webhook_service_pb2_grpc

FULL_NAME = meter_service_pb2.DESCRIPTOR.services_by_name["MeterService"].full_name
# An org's webhooks: money's thresholds are among their events, and this process is the
# one whose background tasks deliver them.
WEBHOOKS = webhook_service_pb2.DESCRIPTOR.services_by_name["WebhookService"].full_name
ROLES = roles.for_services(FULL_NAME, WEBHOOKS)

log = logging.getLogger(__name__)


def build_server(config: Config, *, store: Store | None = None, port: int | None = None) -> Service:
    holder: dict[str, MeterService] = {}
    deliverers: list[Deliverer] = []

    def register(server: grpc.aio.Server, store: Store) -> None:
        tokens = PageTokens(keys.derive(config.master_key(), "page-tokens"))
        catalog = Catalog.discover(config.models_dir)
        service = MeterService(store, config, tokens, catalog)
        holder["service"] = service
        meter_service_pb2_grpc.add_MeterServiceServicer_to_server(MeterServicer(service), server)
        sealer = Sealer(config.master_key())
        guard = Guard(config.webhook_allowed_networks)
        hooks = WebhookService(store, sealer, guard, tokens)
        webhook_service_pb2_grpc.add_WebhookServiceServicer_to_server(
            WebhookServicer(hooks), server
        )
        deliverers.append(Deliverer(store, config, sealer, guard))

    built = build(
        config,
        name="meter",
        full_name=FULL_NAME,
        also_serves=(WEBHOOKS,),
        register=register,
        roles=ROLES,
        store=store,
        port=port,
        hears=("webhooks",),  # deliveries queued
    )

    def accrue() -> str:
        payers, total = holder["service"].sweep_storage()
        return f"storage accrual charged {payers} payers {total} micro-cents"

    # Hourly by default, with the retention sweep.
    built.every(config.sweep_interval_seconds, accrue, "storage accrual")
    built.metrics.registry.register(DeviceSeconds(built.store))
    built.metrics.registry.register(WebhookDeliveries(built.store))
    # Webhooks: the worker sends what commits queue, woken by them; the scans find stalled
    # jobs and expiring outputs. Replicas share both through the database.
    built.background.append(deliverers[0].run)
    built.every(config.webhook_scan_seconds, Scans(built.store).run, "webhook scans")
    return built
