"""The wire's one link upstream: ClientService through the gateway with the caller's own
key (the `tml-` stripped), the names it keeps, each model's call order, its metrics, and
the tokenizers the SDK loads."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from services.core.config import Config
from services.tinker.names import Model, Names
from services.tinker.order import Order
from services.tinker.refusals import Refused, refused_of
from trainyard.artifact.v1 import artifact_service_pb2_grpc
from trainyard.client.v1 import client_pb2, client_service_pb2, client_service_pb2_grpc
from trainyard.training.catalog import Catalog

log = logging.getLogger("trainyard.tinker")

PREFIX = "tml-"
KEY_REFUSED = (
    "The API key is not a Trainyard key for Tinker: use `tml-` followed by a Trainyard key "
    "(`trainyard admin create-key --tinker` prints one)."
)


class Wire:
    """What every route shares: the channel to ClientService, the names, the orders, the
    metrics."""

    def __init__(self, config: Config, target: str) -> None:
        self.config = config
        self.channel = grpc.aio.insecure_channel(target)
        self.clients = client_service_pb2_grpc.ClientServiceStub(self.channel)
        self.artifacts = artifact_service_pb2_grpc.ArtifactServiceStub(self.channel)
        self.names = Names(config.home / "tinker" / "names.json")
        self.orders: dict[str, Order] = {}
        self.tokenizers = config.home / "tinker" / "tokenizers"
        self._checked: dict[str, float] = {}
        registry = CollectorRegistry()
        self.registry = registry
        self.requests = Counter(
            "trainyard_tinker_requests",
            "Requests to the Tinker wire, by route and status.",
            ["route", "status"],
            registry=registry,
        )
        models = Gauge(
            "trainyard_tinker_models",
            "Training models and samplers the wire names.",
            registry=registry,
        )
        models.set_function(lambda: len(self.names.models) + len(self.names.samplers))

    # -- keys ------------------------------------------------------------------------------

    @staticmethod
    def key_of(request: web.Request) -> str:
        given = request.headers.get("x-api-key", "")
        if not given.startswith(PREFIX) or len(given) <= len(PREFIX):
            raise Refused(401, KEY_REFUSED)
        return given[len(PREFIX) :]

    @staticmethod
    def metadata(key: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {key}"),)

    async def rpc(self, method: Any, message: Any, key: str, timeout: float = 150) -> Any:
        try:
            return await method(message, metadata=self.metadata(key), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise Refused(401, KEY_REFUSED) from None
            raise refused_of(exc) from None

    async def check(self, key: str) -> None:
        """The key authenticates; known good keys are not asked again for a minute."""
        digest = hashlib.sha256(key.encode()).hexdigest()
        if self._checked.get(digest, 0) > time.monotonic():
            return
        await self.rpc(
            self.clients.ListTrainingClients,
            client_service_pb2.ListTrainingClientsRequest(page_size=1),
            key,
        )
        self._checked[digest] = time.monotonic() + 60

    async def model(self, model_id: str, key: str) -> tuple[Model, client_pb2.TrainingClient]:
        """The caller's model: another org's answers as an unknown one."""
        found = self.names.models.get(model_id)
        if found is None:
            raise Refused(404, "No such model, sampler, run or future in your org.")
        client = await self.rpc(
            self.clients.GetTrainingClient,
            client_service_pb2.GetTrainingClientRequest(id=found.client_id),
            key,
        )
        return found, client

    async def checkpoint(self, path: str, key: str) -> tuple[Model, dict[str, Any]]:
        """The caller's model and checkpoint a `tinker://` path names."""
        if not path.startswith("tinker://"):
            raise Refused(400, "`path` is not a tinker:// checkpoint path.")
        parts = path[len("tinker://") :].split("/")
        if len(parts) != 3:
            raise Refused(400, "`path` is not a tinker:// checkpoint path.")
        model, _ = await self.model(parts[0], key)
        wanted = f"{parts[1]}/{parts[2]}"
        found = next((c for c in model.checkpoints if c["checkpoint_id"] == wanted), None)
        if found is None:
            raise Refused(404, "No such model, sampler, run or future in your org.")
        return model, found

    def order(self, model_id: str) -> Order:
        return self.orders.setdefault(model_id, Order())

    # -- tokenizers ------------------------------------------------------------------------

    def tokenizer_id(self, base: str) -> str | None:
        """A directory the SDK loads the base's tokenizer from with no hub access: a local
        base's own, or a built-in base as `trainyard models export` writes it (once, under
        the home)."""
        found = self.catalog().get(base)
        if found is None:
            return None
        path = getattr(found, "path", None)
        if path and (Path(path) / "tokenizer.json").is_file():
            return str(path)
        directory = self.tokenizers / base
        if (directory / "tokenizer.json").is_file():
            return str(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.with_name(f".{base}.{secrets.token_hex(4)}")
        export = [str(Path(sys.executable).parent / "trainyard"), "models", "export", base]
        done = subprocess.run(
            [*export, "-o", str(tmp)], capture_output=True, timeout=300, check=False
        )
        if done.returncode != 0 or not (tmp / "tokenizer.json").is_file():
            log.warning("tinker: the tokenizer of %s could not be written", base)
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        (tmp / "model.safetensors").unlink(missing_ok=True)  # the tokenizer is what is read
        try:
            os.replace(tmp, directory)
        except OSError:  # another request wrote it first
            shutil.rmtree(tmp, ignore_errors=True)
        return str(directory)

    def catalog(self) -> Catalog:
        return Catalog.discover(self.config.models_dir)
