"""A task's transfers with the object store, under its lease: the inputs it reads (its
snapshot, the adapter it starts from, a state to resume from) downloaded and checked, an
archive unpacked only when it is what an executor packs; and its outputs packed and
uploaded under a grant. Each keeps trying what may pass, up to the patience, while the
agent's heartbeats keep the lease."""

from __future__ import annotations

import io
import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import grpc
import httpx

from executor.agent.failures import LeaseLost, TaskFailed, classify, reason_of
from trainyard import packing, uploads
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import task_pb2
from trainyard.training import events
from trainyard.training.events import Event

# Its lines keep the logger they had inside the task runner.
log = logging.getLogger("executor.agent.runner")
T = TypeVar("T")
# How long an output upload or an input read keeps trying through a store or gateway that
# does not answer; the lease stays held meanwhile, since heartbeats go on.
PATIENCE_SECONDS = 900.0


class Transfers:
    """The object-store side of `TaskRunner`, which sets what these read."""

    task: task_pb2.Task
    work: Path
    lost: bool
    _patience: float
    _verify: ssl.SSLContext | bool
    _register: Callable[..., artifact_pb2.Grant]
    _read_input: Callable[..., artifact_pb2.Artifact] | None

    def _add(self, event: Event) -> None:
        raise NotImplementedError

    def _patiently(self, what: str, work: Callable[[], T], failure: str) -> T:
        """Run a transfer until it succeeds, retrying what may pass (with backoff, up to
        the patience) while the agent's heartbeats keep the lease."""
        deadline = time.monotonic() + self._patience
        delay = 0.5
        while True:
            try:
                return work()
            except (LeaseLost, TaskFailed):
                raise
            except Exception as exc:
                code = classify(exc)
                if code is not None or time.monotonic() + delay > deadline or self.lost:
                    raise TaskFailed(code or failure) from None
                log.warning(
                    "task %s: %s failed (%s); trying again", self.task.id, what, type(exc).__name__
                )
                time.sleep(delay)
                delay = min(delay * 2, 30.0)

    def _input(self, sha256: str, *, optional: bool = False) -> bytes | None:
        """An object the task reads, downloaded under its lease and checked."""
        read_input = self._read_input
        assert read_input is not None

        def read() -> bytes | None:
            try:
                artifact = read_input(self, sha256)
            except grpc.RpcError as exc:
                if optional and reason_of(exc) == "NOT_FOUND":
                    return None
                raise
            with httpx.Client(timeout=uploads.TIMEOUT, verify=self._verify) as http:
                return uploads.get(http, artifact)

        return self._patiently("reading an input", read, "input_unavailable")

    def _unpacked(self, sha256: str, directory: Path) -> Path:
        """An archived input (the adapter a job starts from, a saved state), unpacked into
        `directory` only if it is what an executor's `pack` writes: another org's machine
        may have made it, and this one may be the platform's."""
        data = self._input(sha256)
        assert data is not None
        try:
            packing.unpack(io.BytesIO(data), directory)
        except packing.UnsafeArchive as exc:
            log.warning("task %s: an input was refused unpacked: %s", self.task.id, exc)
            raise TaskFailed("input_unsafe") from None
        return directory

    def _upload(self, directory: Path, kind: str, name: str, step: int) -> str:
        """Pack a directory, ask for a grant, PUT it, and name it in an `artifact` event.
        An org that holds the bytes already answers `stored`: nothing is sent."""
        packed = self.work / f"{kind}-{step}.tar"
        sha256, size = packing.pack_to_file(directory, packed)

        def send() -> None:
            grant = self._register(self, kind, name, sha256, size, {"step": str(step)})
            if not grant.stored:
                with (
                    httpx.Client(timeout=uploads.TIMEOUT, verify=self._verify) as http,
                    packed.open("rb") as fh,
                ):
                    uploads.put(http, grant, fh)

        self._patiently(f"storing its {kind}", send, "artifact_upload_failed")
        packed.unlink(missing_ok=True)
        self._add(events.Artifact(sha256))
        return sha256
