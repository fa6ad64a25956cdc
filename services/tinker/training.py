"""Routes of a training model: create_model, get_info, forward_backward, optim_step,
save_weights (for the sampler too) and load_weights, each call handed on in `seq_id`
order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from services.tinker import wire
from services.tinker.names import Model, now_iso
from services.tinker.order import rid
from services.tinker.refusals import Refused, int_field, json_body, str_field
from services.tinker.upstream import Wire
from trainyard.client.v1 import client_pb2, client_service_pb2
from trainyard.tinker.v1 import tinker_public_pb2 as tp


class Training:
    """The training routes."""

    def __init__(self, wire_: Wire) -> None:
        self.w = wire_

    async def create_model(self, request: web.Request, key: str) -> web.StreamResponse:
        body = json_body(await request.read())
        session = str_field(body, "session_id")
        seq = int_field(body, "model_seq_id")
        base = str_field(body, "base_model")
        lora = body.get("lora_config") or {}
        model_id = f"{session}:train:{seq}"
        found = self.w.names.models.get(model_id)
        if found is not None:
            await self.w.model(model_id, key)  # another org's answers as unknown
            return web.json_response({"request_id": rid("cm", model_id), "model_id": model_id})
        config = client_pb2.LoraConfig()
        if isinstance(lora.get("rank"), int):
            config.rank = lora["rank"]
        if isinstance(lora.get("seed"), int):
            config.seed = lora["seed"]
        create = client_service_pb2.CreateTrainingClientRequest(
            base_model=base, lora_config=config, wait=30
        )
        await self._create(model_id, create, body, key)
        return web.json_response({"request_id": rid("cm", model_id), "model_id": model_id})

    async def _create(
        self,
        model_id: str,
        create: client_service_pb2.CreateTrainingClientRequest,
        body: dict[str, Any],
        key: str,
    ) -> client_pb2.TrainingClient:
        """A client made for `model_id`, and the name kept."""
        client = await self.w.rpc(self.w.clients.CreateTrainingClient, create, key)
        metadata = body.get("user_metadata") or {}
        self.w.names.models[model_id] = Model(
            model_id=model_id,
            client_id=client.id,
            base_model=client.base_model,
            lora_rank=client.adaptation.rank,
            user_metadata={str(k): str(v) for k, v in metadata.items()},
            created=now_iso(),
        )
        self.w.names.save()
        return client

    async def get_info(self, request: web.Request, key: str) -> web.StreamResponse:
        body = json_body(await request.read())
        model, _ = await self.w.model(str_field(body, "model_id"), key)
        data: dict[str, Any] = {"model_name": model.base_model, "arch": "llama"}
        if tokenizer := await asyncio.to_thread(self.w.tokenizer_id, model.base_model):
            data["tokenizer_id"] = tokenizer
        return web.json_response(
            {
                "model_id": model.model_id,
                "model_data": data,
                "is_lora": True,
                "lora_rank": model.lora_rank,
                "model_name": model.base_model,
                "optimizer_config": {"type": "adamw"},
            }
        )

    # -- training calls --------------------------------------------------------------------

    async def _submit(
        self, model_id: str, seq: int, key: str, make: Callable[[str], Awaitable[str]]
    ) -> web.StreamResponse:
        model, _ = await self.w.model(model_id, key)
        request_id = await self.w.order(model_id).run(seq, lambda: make(model.client_id))
        return web.json_response({"request_id": request_id, "model_id": model_id})

    async def forward_backward(self, request: web.Request, key: str) -> web.StreamResponse:
        raw = await request.read()
        if request.headers.get("content-encoding", "").lower() == "zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=64 << 20)
        parsed = tp.ForwardBackwardRequest()
        try:
            parsed.ParseFromString(raw)
            data = [wire.datum_to_ours(d) for d in parsed.data]
        except wire.WireError as exc:
            raise Refused(400, str(exc)) from None
        except Exception:
            raise Refused(400, "The body is not a tinker_public.ForwardBackwardRequest.") from None
        loss = parsed.loss_fn or "cross_entropy"

        config = wire.loss_config(parsed)

        async def make(client_id: str) -> str:
            future = await self.w.rpc(
                self.w.clients.RunForwardBackward,
                client_service_pb2.RunForwardBackwardRequest(
                    id=client_id,
                    data=data,
                    loss_fn=loss,
                    wait=0,
                    forward_only=parsed.forward_only,
                    loss_fn_config=config,
                ),
                key,
            )
            return rid("fb", future.id)

        return await self._submit(parsed.model_id, parsed.seq_id, key, make)

    async def optim_step(self, request: web.Request, key: str) -> web.StreamResponse:
        body = json_body(await request.read())
        adam = body.get("adam_params") or {}
        params = client_pb2.AdamParams()
        for name in ("learning_rate", "beta1", "beta2", "eps"):
            if isinstance(adam.get(name), int | float):
                setattr(params, name, float(adam[name]))

        async def make(client_id: str) -> str:
            future = await self.w.rpc(
                self.w.clients.RunOptimStep,
                client_service_pb2.RunOptimStepRequest(id=client_id, adam_params=params, wait=0),
                key,
            )
            return rid("os", future.id)

        return await self._submit(str_field(body, "model_id"), int_field(body, "seq_id"), key, make)

    async def _save(self, body: dict[str, Any], key: str, tag: str) -> web.StreamResponse:
        model_id = str_field(body, "model_id")
        name = body.get("path")
        seq = int_field(body, "seq_id")
        if (not isinstance(name, str) or not name) and tag == "ss":
            # save_weights_and_get_sampling_client: saved under a name of its own, and the
            # poll answers a sampler made from it (`se`).
            sampler_seq = int_field(body, "sampling_session_seq_id")
            name, tag = f"sampler-{seq}", "se"
        elif not isinstance(name, str) or not name:
            raise Refused(400, "`path` must be a non-empty name.")

        async def make(client_id: str) -> str:
            future = await self.w.rpc(
                self.w.clients.SaveTrainingClientWeights,
                client_service_pb2.SaveTrainingClientWeightsRequest(
                    id=client_id, name=name, wait=0, kind="state" if tag == "sw" else "lora"
                ),
                key,
            )
            if tag == "se":
                return rid(tag, f"{future.id}.{sampler_seq}")
            return rid(tag, future.id)

        return await self._submit(model_id, seq, key, make)

    async def save_weights(self, request: web.Request, key: str) -> web.StreamResponse:
        return await self._save(json_body(await request.read()), key, "sw")

    async def save_for_sampler(self, request: web.Request, key: str) -> web.StreamResponse:
        return await self._save(json_body(await request.read()), key, "ss")

    async def load_weights(self, request: web.Request, key: str) -> web.StreamResponse:
        body = json_body(await request.read())
        source, checkpoint = await self.w.checkpoint(str_field(body, "path"), key)
        optimizer = bool(body.get("optimizer"))
        if optimizer and checkpoint["checkpoint_type"] != "training":
            raise Refused(400, "Sampler weights hold no optimizer state: load a save_state path.")
        create = client_service_pb2.CreateTrainingClientRequest(
            base_model=source.base_model, wait=30, with_optimizer=optimizer
        )
        setattr(create, "from", checkpoint["sha256"])  # `from` is a Python keyword
        if "model_id" not in body:
            # create_training_client_from_state: a new model, named as the SDK derives it.
            model_id = f"{str_field(body, 'session_id')}:train:{int_field(body, 'model_seq_id')}"
            if model_id not in self.w.names.models:
                await self._create(model_id, create, body, key)
            else:
                await self.w.model(model_id, key)
            return web.json_response({"request_id": rid("cm", model_id), "model_id": model_id})
        # load_state on a model: its client is replaced by one made from the checkpoint.
        model_id = str_field(body, "model_id")
        current, _ = await self.w.model(model_id, key)

        async def replace(client_id: str) -> str:
            old = current.client_id
            made = await self.w.rpc(self.w.clients.CreateTrainingClient, create, key)
            current.client_id = made.id
            self.w.names.save()
            with contextlib.suppress(Refused):
                await self.w.rpc(
                    self.w.clients.DeleteTrainingClient,
                    client_service_pb2.DeleteTrainingClientRequest(id=old),
                    key,
                )
            return rid("cm", model_id)

        return await self._submit(model_id, int_field(body, "seq_id"), key, replace)
