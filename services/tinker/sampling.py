"""Routes of sampling: a sampler is a training client of its own, made from saved weights
or the bare base."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from services.tinker.order import rid
from services.tinker.refusals import Refused, int_field, json_body, str_field
from services.tinker.upstream import Wire
from trainyard.client.v1 import client_pb2, client_service_pb2


def _trim_sample_params(params: dict[str, Any]) -> client_pb2.SamplingParams:
    out = client_pb2.SamplingParams(max_tokens=int(params.get("max_tokens") or 16))
    if params.get("temperature") is not None:
        out.temperature = float(params["temperature"])
    if int(params.get("top_k") or -1) > 0:
        out.top_k = int(params["top_k"])
    if params.get("top_p") is not None:
        out.top_p = float(params["top_p"])
    if params.get("seed") is not None:
        out.seed = int(params["seed"])
    stop = params.get("stop")
    if isinstance(stop, str):
        out.stop.append(stop)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        out.stop.extend(stop)
    return out


class Sampling:
    """The sampling routes."""

    def __init__(self, wire_: Wire) -> None:
        self.w = wire_

    async def create_sampling_session(self, request: web.Request, key: str) -> web.StreamResponse:
        """A sampler is a client of its own, made from the saved weights (or the bare base),
        so it samples exactly what was saved while training goes on."""
        body = json_body(await request.read())
        sampler_id = (
            f"{str_field(body, 'session_id')}:sample:{int_field(body, 'sampling_session_seq_id')}"
        )
        path = body.get("model_path")
        if sampler_id in self.w.names.samplers:
            await self._sampler(sampler_id, key)
            return web.json_response({"sampling_session_id": sampler_id})
        if isinstance(path, str) and path:
            source, checkpoint = await self.w.checkpoint(path, key)
            create = client_service_pb2.CreateTrainingClientRequest(
                base_model=source.base_model, wait=30
            )
            setattr(create, "from", checkpoint["sha256"])  # `from` is a Python keyword
        else:
            create = client_service_pb2.CreateTrainingClientRequest(
                base_model=str_field(body, "base_model"), wait=30
            )
        client = await self.w.rpc(self.w.clients.CreateTrainingClient, create, key)
        self.w.names.samplers[sampler_id] = {
            "client_id": client.id,
            "base_model": client.base_model,
            "model_path": path if isinstance(path, str) else "",
        }
        self.w.names.save()
        return web.json_response({"sampling_session_id": sampler_id})

    async def _sampler(self, sampler_id: str, key: str) -> dict[str, str]:
        """The caller's sampler: another org's answers as an unknown one."""
        found = self.w.names.samplers.get(sampler_id)
        if found is None or "client_id" not in found:
            raise Refused(404, "No such model, sampler, run or future in your org.")
        await self.w.rpc(
            self.w.clients.GetTrainingClient,
            client_service_pb2.GetTrainingClientRequest(id=found["client_id"]),
            key,
        )
        return found

    async def sampler(self, request: web.Request, key: str) -> web.StreamResponse:
        sampler_id = request.match_info["sampler_id"]
        found = await self._sampler(sampler_id, key)
        answer = {"sampler_id": sampler_id, "base_model": found["base_model"]}
        if found["model_path"]:
            answer["model_path"] = found["model_path"]
        return web.json_response(answer)

    async def asample(self, request: web.Request, key: str) -> web.StreamResponse:
        body = json_body(await request.read())
        found = self.w.names.samplers.get(str_field(body, "sampling_session_id"))
        if found is None or "client_id" not in found:
            raise Refused(404, "No such model, sampler, run or future in your org.")
        prompt = body.get("prompt") or {}
        tokens: list[int] = []
        for chunk in prompt.get("chunks") or []:
            if not isinstance(chunk, dict) or chunk.get("type") != "encoded_text":
                raise Refused(400, "prompt: only encoded_text chunks are served.")
            tokens.extend(int(t) for t in chunk.get("tokens") or [])
        num = body.get("num_samples") or 1
        if not isinstance(num, int) or not 1 <= num <= 16:
            raise Refused(400, "`num_samples` must be 1 to 16.")
        params = _trim_sample_params(body.get("sampling_params") or {})
        logprobs = bool(body.get("prompt_logprobs"))
        future = await self.w.rpc(
            self.w.clients.SampleTrainingClient,
            client_service_pb2.SampleTrainingClientRequest(
                id=found["client_id"],
                prompt=client_pb2.ModelInput(tokens=tokens),
                num_samples=num,
                sampling_params=params,
                wait=0,
                prompt_logprobs=logprobs,
            ),
            key,
        )
        tag = "pl" if logprobs else "sm"
        ids = [f"{future.id}:{n}" for n in range(num)]
        return web.json_response({"request_id": rid(tag, future.id), "sample_sequence_ids": ids})
