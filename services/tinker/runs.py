"""Routes of training runs and their checkpoints, as the SDK's RestClient lists them."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from google.protobuf import json_format

from services.tinker.names import Model
from services.tinker.refusals import Refused
from services.tinker.upstream import Wire
from trainyard.artifact.v1 import artifact_service_pb2
from trainyard.client.v1 import client_pb2, client_service_pb2


class Runs:
    """The run routes."""

    def __init__(self, wire_: Wire) -> None:
        self.w = wire_

    async def training_runs(self, request: web.Request, key: str) -> web.StreamResponse:
        try:
            limit = int(request.query.get("limit", "20"))
            offset = int(request.query.get("offset", "0"))
        except ValueError:
            raise Refused(400, "`limit` and `offset` must be integers.") from None
        if not 1 <= limit <= 100 or offset < 0:
            raise Refused(400, "`limit` must be 1 to 100 and `offset` not negative.")
        runs: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.w.rpc(
                self.w.clients.ListTrainingClients,
                client_service_pb2.ListTrainingClientsRequest(page_size=100, page_token=token),
                key,
            )
            for client in page.clients:
                model = self.w.names.by_client(client.id)
                if model is not None:
                    runs.append(self._run(model, client))
            token = page.next_page_token
            if not token:
                break
        return web.json_response(
            {
                "training_runs": runs[offset : offset + limit],
                "cursor": {"offset": offset, "limit": limit, "total_count": len(runs)},
            }
        )

    @staticmethod
    def _run(model: Model, client: client_pb2.TrainingClient) -> dict[str, Any]:
        def last(kind: str) -> dict[str, Any] | None:
            found = [c for c in model.checkpoints if c["checkpoint_type"] == kind]
            return _public(found[-1]) if found else None

        return {
            "training_run_id": model.model_id,
            "base_model": model.base_model,
            "model_owner": "",
            "is_lora": True,
            "lora_rank": model.lora_rank,
            "corrupted": client.status not in ("placing", "ready"),
            "last_request_time": json_format.MessageToDict(client)["updateTime"]
            if client.HasField("update_time")
            else model.created,
            "last_checkpoint": last("training"),
            "last_sampler_checkpoint": last("sampler"),
            "user_metadata": model.user_metadata,
        }

    async def training_run(self, request: web.Request, key: str) -> web.StreamResponse:
        model, client = await self.w.model(request.match_info["run_id"], key)
        return web.json_response(self._run(model, client))

    async def checkpoints(self, request: web.Request, key: str) -> web.StreamResponse:
        model, _ = await self.w.model(request.match_info["run_id"], key)
        return web.json_response(
            {"checkpoints": [_public(c) for c in model.checkpoints], "cursor": None}
        )

    async def delete_checkpoint(self, request: web.Request, key: str) -> web.StreamResponse:
        """Forget a checkpoint's name and delete the org's object behind it (ArtifactService
        refuses one a job still holds), unless another name still stands for the same
        bytes."""
        model, _ = await self.w.model(request.match_info["run_id"], key)
        wanted = f"{request.match_info['kind']}/{request.match_info['name']}"
        found = next((c for c in model.checkpoints if c["checkpoint_id"] == wanted), None)
        if found is None:
            raise Refused(404, "No such checkpoint of this run.")
        shared = any(
            c is not found and c.get("sha256") == found.get("sha256")
            for m in self.w.names.models.values()
            for c in m.checkpoints
        )
        if not shared and found.get("sha256"):
            request_ = artifact_service_pb2.DeleteArtifactRequest(sha256=found["sha256"])
            await self.w.rpc(self.w.artifacts.DeleteArtifact, request_, key)
        model.checkpoints = [c for c in model.checkpoints if c is not found]
        self.w.names.save()
        return web.Response(status=204)


def _public(checkpoint: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in checkpoint.items() if k != "sha256"}
