"""Routes of the SDK's session: its config, sessions begun, beaten and finished,
telemetry, and the bases served."""

from __future__ import annotations

import contextlib
import secrets

from aiohttp import web

from services.tinker.refusals import Refused
from services.tinker.upstream import Wire
from trainyard.client.v1 import client_service_pb2

# The SDK applies these; the wire answers them in order, one model's at a time.
CONFIG = {"parallel_fwdbwd_chunks": False, "pjwt_auth_enabled": False}


class Sessions:
    """The session routes."""

    def __init__(self, wire_: Wire) -> None:
        self.w = wire_

    async def client_config(self, request: web.Request, key: str) -> web.StreamResponse:
        await self.w.check(key)
        return web.json_response(CONFIG)

    async def create_session(self, request: web.Request, key: str) -> web.StreamResponse:
        await self.w.check(key)
        return web.json_response({"session_id": f"ses_{secrets.token_hex(8)}"})

    async def ok(self, request: web.Request, key: str) -> web.StreamResponse:
        await self.w.check(key)
        return web.json_response({})

    async def finish(self, request: web.Request, key: str) -> web.StreamResponse:
        """The session ended: its training clients are deleted, which frees their engine
        slots and ends their holds; what they saved stays the org's."""
        await self.w.check(key)
        session = request.match_info["session_id"]
        ids = [
            m.client_id
            for m in self.w.names.models.values()
            if m.model_id.startswith(f"{session}:train:")
        ]
        ids += [
            found["client_id"]
            for sampler_id, found in self.w.names.samplers.items()
            if sampler_id.startswith(f"{session}:sample:") and "client_id" in found
        ]
        for client_id in ids:
            with contextlib.suppress(Refused):
                await self.w.rpc(
                    self.w.clients.DeleteTrainingClient,
                    client_service_pb2.DeleteTrainingClientRequest(id=client_id),
                    key,
                )
        return web.json_response({})

    async def telemetry(self, request: web.Request, key: str) -> web.StreamResponse:
        await self.w.check(key)
        return web.json_response({"status": "accepted"})

    async def capabilities(self, request: web.Request, key: str) -> web.StreamResponse:
        await self.w.check(key)
        catalog = self.w.catalog()
        bases = [catalog.get(name) for name in catalog.names]
        models = [
            {"model_name": b.name, "trainable": True, "sampleable": True}
            for b in bases
            if b is not None and b.serves_clients
        ]
        return web.json_response({"supported_models": models})
