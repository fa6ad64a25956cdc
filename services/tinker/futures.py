"""retrieve_future: a request id long-polled upstream for at most POLL_SECONDS, answered
`try_again` while it runs, then as the SDK expects the call's kind (protobuf or JSON), or
as a refusal it shows."""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp import web

from services.tinker import wire
from services.tinker.names import now_iso
from services.tinker.order import ERRORS
from services.tinker.refusals import Refused, json_body, str_field
from services.tinker.upstream import Wire
from trainyard.client.v1 import client_pb2, client_service_pb2

# How long a retrieve_future holds its poll before answering try_again (the SDK waits 45 s).
POLL_SECONDS = 30
PROTOBUF = "application/x-protobuf"


class Futures:
    """The future route."""

    def __init__(self, wire_: Wire) -> None:
        self.w = wire_

    async def retrieve_future(self, request: web.Request, key: str) -> web.StreamResponse:
        body = json_body(await request.read())
        request_id = str_field(body, "request_id")
        tag, _, value = request_id.partition(".")
        if tag == "er":
            await self.w.check(key)
            message = ERRORS.get(value)
            if message is None:
                raise Refused(404, "No such model, sampler, run or future in your org.")
            category = "server" if value == "gone" else "user"
            return web.json_response({"error": message, "category": category})
        if tag == "cm":
            return await self._created(value, key, request_id)
        if tag not in ("fb", "os", "sm", "pl", "sw", "ss", "se"):
            raise Refused(404, "No such model, sampler, run or future in your org.")
        value, _, sampler_seq = value.partition(".")
        future = await self.w.rpc(
            self.w.clients.GetFuture,
            client_service_pb2.GetFutureRequest(id=value, wait=POLL_SECONDS),
            key,
        )
        if future.status == "failed":
            category = "user" if future.error.code in ("INVALID_ARGUMENT",) else "server"
            return web.json_response(
                {"error": future.error.message or "The call failed.", "category": category}
            )
        if future.status != "done":
            return web.json_response(
                {"type": "try_again", "request_id": request_id, "queue_state": "active"}
            )
        if tag == "se":
            return await self._ephemeral(future, int(sampler_seq or 0), key)
        return self._result(tag, future)

    async def _ephemeral(
        self, future: client_pb2.Future, sampler_seq: int, key: str
    ) -> web.StreamResponse:
        """The sampler of weights saved without a name: a client from them, replacing the
        model's previous one (an RL loop asks for one a step and drops the last)."""
        model = self.w.names.by_client(future.client_id)
        if model is None:
            raise Refused(404, "No such model, sampler, run or future in your org.")
        session = model.model_id.split(":train:")[0]
        sampler_id = f"{session}:sample:{sampler_seq}"
        if sampler_id in self.w.names.samplers:
            return web.json_response({"sampling_session_id": sampler_id})
        for other_id, other in list(self.w.names.samplers.items()):
            if other.get("ephemeral_of") == model.model_id:
                with contextlib.suppress(Refused):
                    await self.w.rpc(
                        self.w.clients.DeleteTrainingClient,
                        client_service_pb2.DeleteTrainingClientRequest(id=other["client_id"]),
                        key,
                    )
                del self.w.names.samplers[other_id]
        create = client_service_pb2.CreateTrainingClientRequest(
            base_model=model.base_model, wait=30
        )
        setattr(create, "from", future.save_weights.sha256)  # `from` is a Python keyword
        try:
            client = await self.w.rpc(self.w.clients.CreateTrainingClient, create, key)
        except Refused as exc:
            return web.json_response({"error": exc.message, "category": exc.category})
        self.w.names.samplers[sampler_id] = {
            "client_id": client.id,
            "base_model": client.base_model,
            "model_path": "",
            "ephemeral_of": model.model_id,
        }
        self.w.names.save()
        return web.json_response({"sampling_session_id": sampler_id})

    def _result(self, tag: str, future: client_pb2.Future) -> web.StreamResponse:
        if tag == "fb":
            return web.Response(
                body=wire.forward_backward_output(future.forward_backward), content_type=PROTOBUF
            )
        if tag in ("sm", "pl"):
            return web.Response(
                body=wire.sample_output(future.sample, prompt_logprobs=tag == "pl"),
                content_type=PROTOBUF,
            )
        if tag == "os":
            metrics = {wire.metric_key(k): v for k, v in future.optim_step.metrics.items()}
            return web.json_response({"metrics": metrics})
        saved = future.save_weights
        model = self.w.names.by_client(future.client_id)
        model_id = model.model_id if model else future.client_id
        kind = "weights" if tag == "sw" else "sampler_weights"
        path = f"tinker://{model_id}/{kind}/{saved.name}"
        if model is not None:
            checkpoint_id = f"{kind}/{saved.name}"
            model.checkpoints = [
                c for c in model.checkpoints if c["checkpoint_id"] != checkpoint_id
            ]
            model.checkpoints.append(
                {
                    "checkpoint_id": checkpoint_id,
                    "checkpoint_type": "training" if tag == "sw" else "sampler",
                    "time": now_iso(),
                    "tinker_path": path,
                    "size_bytes": int(saved.size),
                    "public": False,
                    "sha256": saved.sha256,
                }
            )
            self.w.names.save()
        return web.json_response({"path": path})

    async def _created(self, model_id: str, key: str, request_id: str) -> web.StreamResponse:
        deadline = time.monotonic() + POLL_SECONDS
        while True:
            _, client = await self.w.model(model_id, key)
            if client.status == "ready":
                return web.json_response({"model_id": model_id})
            if client.status != "placing":
                return web.json_response(
                    {
                        "error": client.message or "The model could not be loaded.",
                        "category": "server",
                    }
                )
            if time.monotonic() > deadline:
                return web.json_response(
                    {"type": "try_again", "request_id": request_id, "queue_state": "active"}
                )
            await asyncio.sleep(0.5)
