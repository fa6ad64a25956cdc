"""Process bootstrap shared by the four services: a grpc.aio server with the gateway
interceptor, health and reflection, its bound port published under `home/run/`, its
metrics on the loopback port the supervisor names, and a graceful SIGTERM (health
NOT_SERVING, drain, exit)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import signal
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from services.core import logs
from services.core.config import Config
from services.core.metrics import Metrics
from services.core.rpc import Authenticator, GatewayInterceptor
from services.core.store import Store, open_store
from services.core.wakeups import woken
from trainyard.exposition import metrics_port_file
from trainyard.ports import publish_port
from trainyard.private import private

log = logging.getLogger(__name__)

DRAIN_SECONDS = 10.0

# The gateway and the executors ping their HTTP/2 connections every 30 s, with or without
# a call open; gRPC's default policy would answer such pings with GOAWAY too_many_pings
# and drop every stream on the connection.
KEEPALIVE_POLICY = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
]


@dataclasses.dataclass
class Service:
    """A built, not yet started, service process."""

    name: str
    full_name: str
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    store: Store
    metrics: Metrics
    # Further gRPC services the same server registers; each answers health like the first.
    also_serves: tuple[str, ...] = ()
    # The kinds of wake-up topic its waiters watch (services/core/wakeups.py).
    hears: tuple[str, ...] = ()
    # Loops the process runs beside its server. Each gets the `stopping` event and returns
    # soon after it is set; stop() waits for them so no work is cut off mid-transaction.
    background: list[Callable[[asyncio.Event], Coroutine[Any, Any, None]]] = dataclasses.field(
        default_factory=list
    )
    _stopping: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)

    def every(self, seconds: float, work: Callable[[], str | None], what: str) -> None:
        """Run `work` in a thread every `seconds` until the process stops, logging the line
        it returns (None: nothing worth a line) or its failure."""

        async def loop(stopping: asyncio.Event) -> None:
            while not stopping.is_set():
                if await woken(stopping, seconds):
                    return
                try:
                    if line := await asyncio.to_thread(work):
                        log.info("%s", line)
                except Exception:
                    log.exception("%s failed", what)

        self.background.append(loop)

    async def start(self) -> None:
        await self.server.start()
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        for full_name in (self.full_name, *self.also_serves):
            await self.health.set(full_name, health_pb2.HealthCheckResponse.SERVING)
        self._tasks = [asyncio.create_task(loop(self._stopping)) for loop in self.background]

    async def stop(self, grace: float = DRAIN_SECONDS) -> None:
        await self.health.enter_graceful_shutdown()
        self._stopping.set()
        await self.server.stop(grace)
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=grace)
            for task in late:
                task.cancel()
        self.store.dispose()


def build(
    config: Config,
    *,
    name: str,
    full_name: str,
    register: Callable[[grpc.aio.Server, Store], None],
    roles: Mapping[str, frozenset[str]],
    store: Store | None = None,
    port: int | None = None,
    also_serves: Sequence[str] = (),
    metrics: Metrics | None = None,
    hears: Sequence[str] = (),
) -> Service:
    """Build a service's server on `config.bind_host`; port 0 binds an ephemeral one.
    `register` adds `full_name`'s servicer and those of `also_serves`, whose methods
    `roles` must name too. `metrics` is the process's registry, when the service counts
    things of its own on it before the server is built. `hears`: the kinds of wake-up
    its waiters watch, the only ones the other processes send it."""
    store = store or open_store(config.database_url)
    metrics = metrics or Metrics()
    server = grpc.aio.server(
        interceptors=[
            GatewayInterceptor(
                Authenticator(store), roles, metrics.rpc, streams_per_key=config.streams_per_key
            )
        ],
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
            *KEEPALIVE_POLICY,
        ],
    )
    register(server, store)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (
            full_name,
            *also_serves,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ),
        server,
    )
    wanted = config.port_for(name) if port is None else port
    bound = server.add_insecure_port(f"{config.bind_host}:{wanted}")
    if bound == 0:
        raise RuntimeError(f"{name}: cannot bind port {wanted}")
    return Service(
        name,
        full_name,
        server,
        bound,
        health_servicer,
        store,
        metrics,
        tuple(also_serves),
        tuple(hears),
    )


async def _serve(config: Config, build_service: Callable[[Config], Service]) -> None:
    # The aio server binds to the running loop, so it is built inside it.
    service = build_service(config)
    # A replica's run files carry its own name, so replicas of one service never share one.
    instance = config.replica_name or service.name
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    exporter = None
    if config.metrics_port is not None:
        exporter = service.metrics.serve(config.metrics_port)
        publish_port(metrics_port_file(config.run_dir, instance), exporter.port)
        log.info("%s metrics on %s", instance, exporter.url)
    # Wake-ups from and to the other processes on the same database.
    service.store.wakeups.connect(config.database_url, config.run_dir, service.hears)
    try:
        await service.start()
        _collect_rarely()
        port_file = publish_port(config.run_dir / f"{instance}.port", service.port)
        log.info("%s serving on %s:%d", instance, config.bind_host, service.port)
        await stopping.wait()
        log.info("%s draining", instance)
        port_file.unlink(missing_ok=True)
        await service.stop()
        log.info("%s stopped", instance)
    finally:
        service.store.wakeups.close()
        if exporter is not None:
            exporter.close()


# Objects made before a young collection runs (CPython's default is 700): a report of 500
# events makes thousands that live until its commit; collected every 700 they are found
# alive, promoted, and walked again by the full collections that follow.
YOUNG_OBJECTS = 10_000


def _collect_rarely() -> None:
    """What the process made to start (modules, tables, stubs) lives as long as it does:
    frozen out of the collector's scans, and young collections made rare, so a full one,
    which walks every object and stops every stream the process holds while it does,
    comes seldom and walks only what serving made."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])


def main(name: str, build_service: Callable[[Config], Service]) -> None:
    """Entry point of `python -m services.<name>`."""
    private()  # its database, journals and run files hold every org's data
    config = Config.from_env()
    logs.configure(config.replica_name or name, fmt=config.log_format, level=config.log_level)
    asyncio.run(_serve(config, build_service))
