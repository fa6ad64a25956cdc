"""The Tinker wire: `/api/v1/` as the official `tinker` SDK (0.38.0) speaks it, served
over HTTP/1.1 behind Envoy and translated onto ClientService.

It holds no database and no secret. Every call it makes is ClientService's, through
the gateway, with the caller's own key as `authorization: Bearer`, so roles, org scoping
and metering are those of every other route; another org's model or future answers as an
unknown one because ClientService answers it so. The SDK's key is `tml-` followed by a
whole Trainyard key. What it keeps is the SDK's names for Trainyard's things: a model id
`{session}:train:{n}` for a client id, and the checkpoints saved under it, in a small
JSON file under the home; nothing in it grants access.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from services.core import logs
from services.core.config import Config
from services.tinker.futures import Futures
from services.tinker.refusals import Refused, problem
from services.tinker.runs import Runs
from services.tinker.sampling import Sampling
from services.tinker.sessions import Sessions
from services.tinker.training import Training
from services.tinker.upstream import Wire
from trainyard.exposition import Exporter, metrics_port_file
from trainyard.ports import publish_port
from trainyard.private import private

log = logging.getLogger("trainyard.tinker")


Handler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


def build_app(wire_: Wire) -> web.Application:
    sessions, training, sampling = Sessions(wire_), Training(wire_), Sampling(wire_)
    futures, runs = Futures(wire_), Runs(wire_)
    app = web.Application(client_max_size=64 << 20)

    def keyed(
        name: str, handler: Handler
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def serve(request: web.Request) -> web.StreamResponse:
            try:
                answer = await handler(request, Wire.key_of(request))
            except Refused as exc:
                answer = problem(exc.status, exc.message, exc.category)
            except Exception:
                log.exception("tinker %s failed", name)
                answer = problem(500, "The server failed; retry later.", "server")
            wire_.requests.labels(name, str(answer.status)).inc()
            return answer

        return serve

    async def healthz(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "ok"})

    async def unknown(request: web.Request) -> web.StreamResponse:
        return problem(404, "No such Tinker route on this server.")

    post = {
        "client/config": sessions.client_config,
        "create_session": sessions.create_session,
        "session_heartbeat": sessions.ok,
        "sessions/{session_id}/finish": sessions.finish,
        "telemetry": sessions.telemetry,
        "create_model": training.create_model,
        "get_info": training.get_info,
        "forward_backward": training.forward_backward,
        "optim_step": training.optim_step,
        "save_weights": training.save_weights,
        "save_weights_for_sampler": training.save_for_sampler,
        "load_weights": training.load_weights,
        "create_sampling_session": sampling.create_sampling_session,
        "asample": sampling.asample,
        "retrieve_future": futures.retrieve_future,
    }
    get = {
        "get_server_capabilities": sessions.capabilities,
        "samplers/{sampler_id}": sampling.sampler,
        "training_runs": runs.training_runs,
        "training_runs/{run_id}": runs.training_run,
        "training_runs/{run_id}/checkpoints": runs.checkpoints,
    }
    app.router.add_get("/api/v1/healthz", healthz)
    # A checkpoint id is `weights/<name>` or `sampler_weights/<name>`, sent unescaped.
    app.router.add_delete(
        "/api/v1/training_runs/{run_id}/checkpoints/{kind:weights|sampler_weights}/{name}",
        keyed("training_runs/{run_id}/checkpoints/delete", runs.delete_checkpoint),
    )
    for path, handler in post.items():
        app.router.add_post(f"/api/v1/{path}", keyed(path, handler))
    for path, handler in get.items():
        app.router.add_get(f"/api/v1/{path}", keyed(path, handler))
    app.router.add_route("*", "/api/v1/{tail:.*}", unknown)
    return app


async def serve(config: Config) -> None:
    gateway = urlsplit(config.gateway_url)
    target = f"{gateway.hostname}:{gateway.port or 80}"
    wire_ = Wire(config, target)
    instance = config.replica_name or "tinker"
    exporter = None
    if config.metrics_port is not None:
        exporter = Exporter(wire_.registry, config.metrics_port)
        publish_port(metrics_port_file(config.run_dir, instance), exporter.port)
    runner = web.AppRunner(build_app(wire_), access_log=None)
    await runner.setup()
    # SO_REUSEADDR: a restarted wire binds its port again while the old one's connections
    # sit in TIME_WAIT (on Linux it never lets two processes listen on one port).
    site = web.TCPSite(runner, config.bind_host, config.port_for("tinker"), reuse_address=True)
    await site.start()
    server = site._server
    assert server is not None and server.sockets  # type: ignore[attr-defined]
    port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    port_file = publish_port(config.run_dir / f"{instance}.port", port)
    log.info("%s serving on %s:%d", instance, config.bind_host, port)
    try:
        await stopping.wait()
    finally:
        port_file.unlink(missing_ok=True)
        await runner.cleanup()
        await wire_.channel.close()
        if exporter is not None:
            exporter.close()


def main() -> None:
    private()
    config = Config.from_env()
    logs.configure(config.replica_name or "tinker", fmt=config.log_format, level=config.log_level)
    asyncio.run(serve(config))
