"""One training client on the executor: its engine subprocess (`executor.engines`), the
operations the service sends forwarded to it in order, and each answer sent back as an
`OperationResult`; a saved adapter is packed and stored as an artifact of the client.

The engine applies each seq once and answers a repeated one from its cache, so an
operation the service sends again (after a reconnect) is simply forwarded again.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import queue
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from executor.agent.failures import LeaseLost, classify
from trainyard import packing, uploads
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2
from trainyard.private import without_secrets

log = logging.getLogger(__name__)

# Puts one message on the live stream (or drops it when none is up).
Send = Callable[[claim_service_pb2.ConnectRequest], None]
# Registers an output of the client: (runner, name, sha256, size, meta) -> a grant.
RegisterClient = Callable[["ClientRunner", str, str, int, dict[str, str]], artifact_pb2.Grant]
# Where to download what the client reads under its lease (the adapter its `from` names).
ReadClient = Callable[["ClientRunner", str], artifact_pb2.Artifact]
# How long a saved adapter's upload keeps trying through a store that does not answer;
# the caller is waiting on the answer meanwhile.
UPLOAD_PATIENCE_SECONDS = 120.0


class ClientRunner:
    """Holds one client's engine and forwards its operations; answers go out by `send`."""

    def __init__(
        self,
        create: claim_service_pb2.ClientOperation,
        work_root: Path,
        send: Send,
        register: RegisterClient,
        *,
        env: dict[str, str] | None = None,
        patience: float = UPLOAD_PATIENCE_SECONDS,
        engine: Sequence[str] = (sys.executable, "-m", "executor.engines"),
        keep_work: bool = False,
        read: ReadClient | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.id = create.client
        self.lease = create.lease
        self.org = create.org
        self.report = create.report
        self.work = work_root / self.id
        self._create_input = create.input
        self._send, self._register, self._read_input = send, register, read
        self._env, self._patience, self._engine = env or {}, patience, list(engine)
        self._keep_work = keep_work
        self._verify = verify
        self._ops: queue.Queue[tuple[int, str, str] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        # The answer to `create` once known (None while the engine loads).
        self._created: claim_service_pb2.OperationResult | None = None
        # Saved adapters already stored, by seq: a repeated save answers without a new upload.
        self._saved: dict[int, claim_service_pb2.OperationResult] = {}
        self.base = ""
        self.closed = False
        # The engine is gone (failed to load, died, or closed): nothing more will be applied.
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"client-{self.id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, seq: int, kind: str, input: str, lease: str = "") -> None:
        """Take an operation; `create` again (seq 0, sent on a new stream before its answer
        came) carries the client's new lease and repeats its answer once there is one."""
        if seq == 0 or kind == "create":
            with self._lock:
                self.lease = lease or self.lease
                created = self._created
            if created is not None:
                again = claim_service_pb2.OperationResult()
                again.CopyFrom(created)
                again.lease = self.lease
                self._emit(again)
            return
        self._ops.put((seq, kind, input))

    def close(self) -> None:
        """Drop the client: its engine is killed at once and nothing more is sent."""
        with self._lock:
            self.closed = True
        self._ops.put(None)
        self._kill()

    # -- the engine ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            if self._load():
                self._serve()
        except Exception:
            log.exception("client %s failed in the executor", self.id)
            self._engine_ended()
        finally:
            self._reap()
            # What it saved is in the store; the org's inputs and weights go with the engine.
            if not self._keep_work:
                shutil.rmtree(self.work, ignore_errors=True)
            self.ended.set()

    def _load(self) -> bool:
        """Start the engine and answer `create`: True once it is ready."""
        self.work.mkdir(parents=True, exist_ok=True)
        try:
            create = json.loads(self._create_input or "{}")
            if not isinstance(create, dict):
                raise ValueError()
        except ValueError:
            create = None
        if create is None:
            self._answer_create(False, "the client's settings could not be read")
            return False
        self.base = str(create.get("base_model", ""))
        spec = {
            "client": self.id,
            "base_model": self.base,
            "adaptation": create.get("adaptation") or {},
            "seed": create.get("seed") or 0,
            "work_dir": str(self.work),
        }
        origin = str(create.get("from") or "")
        if origin:
            # The saved adapter or state it starts from, read under its lease.
            init = self._origin(origin)
            if init is None:
                self._answer_create(False, "the adapter the client starts from could not be read")
                return False
            spec["init_dir"] = str(init)
            spec["with_optimizer"] = bool(create.get("with_optimizer"))
        (self.work / "engine.json").write_text(json.dumps(spec))
        with open(self.work / "engine.log", "a") as stderr, self._lock:
            if self.closed:
                return False
            self._process = subprocess.Popen(
                [*self._engine, str(self.work / "engine.json")],
                cwd=self.work,
                env={**without_secrets(os.environ), **self._env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        first = self._read(None)
        if first is not None and first.get("ready"):
            log.info("client %s: the engine loaded %s", self.id, self.base)
            self._answer_create(True, "")
            return True
        code = str(first.get("failed", "")) if first else "engine_failed"
        log.warning("client %s: the engine did not load (%s)", self.id, code or "engine_failed")
        self._kill()
        self._answer_create(
            False,
            "the base is not on this executor"
            if code == "base_not_found"
            else "the engine could not load the client",
        )
        return False

    def _origin(self, sha256: str) -> Path | None:
        """The object `from` names, downloaded, checked and unpacked (only if it is what
        an executor's `pack` writes: another machine made it); None when it cannot be."""
        if self._read_input is None:
            return None
        directory = self.work / "from"
        try:
            artifact = self._read_input(self, sha256)
            with httpx.Client(timeout=uploads.TIMEOUT, verify=self._verify) as http:
                data = uploads.get(http, artifact)
            packing.unpack(io.BytesIO(data), directory)
        except Exception as exc:
            log.warning(
                "client %s: its adapter could not be read (%s)", self.id, type(exc).__name__
            )
            return None
        return directory

    def _answer_create(self, ok: bool, message: str) -> None:
        result = claim_service_pb2.OperationResult(
            client=self.id,
            lease=self.lease,
            seq=0,
            ok=ok,
            code="" if ok else "ENGINE_FAILED",
            message=message,
        )
        with self._lock:
            self._created = result
        self._emit(result)

    def _serve(self) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        while True:
            try:
                op = self._ops.get(timeout=1.0)
            except queue.Empty:
                if process.poll() is not None:
                    self._engine_ended()
                    return
                continue
            if op is None or self.closed:
                return
            seq, kind, raw = op
            try:
                body: Any = json.loads(raw) if raw else {}
            except ValueError:
                body = raw  # the engine refuses it, naming `input`
            try:
                process.stdin.write(json.dumps({"seq": seq, "kind": kind, "input": body}) + "\n")
                process.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._engine_ended()
                return
            answer = self._read(seq)
            if answer is None:
                self._engine_ended()
                return
            if (result := self._result(kind, answer)) is not None:
                self._emit(result)

    def _read(self, seq: int | None) -> dict[str, Any] | None:
        """The engine's next answer to `seq`, or its ready (or failed) line when None;
        other lines are skipped. None once its output ends."""
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and (
                message.get("seq") == seq
                if seq is not None
                else "ready" in message or "failed" in message
            ):
                return message
            log.debug("client %s: the engine wrote a line that is not an answer", self.id)
        return None

    def _result(
        self, kind: str, answer: dict[str, Any]
    ) -> claim_service_pb2.OperationResult | None:
        seq = int(answer["seq"])
        seconds = float(answer.get("seconds") or 0.0)
        if not answer.get("ok"):
            return claim_service_pb2.OperationResult(
                client=self.id,
                lease=self.lease,
                seq=seq,
                ok=False,
                code=str(answer.get("code", "")),
                message=str(answer.get("message", "")),
                field=str(answer.get("field", "")),
                seconds=seconds,
            )
        output = answer.get("output") or {}
        if kind == "save_weights":
            if seq in self._saved:
                return self._saved[seq]
            try:
                output = self._store(output)
            except LeaseLost:
                log.warning("client %s: the lease is lost; closing it", self.id)
                self.close()
                return None
            except Exception as exc:
                log.warning(
                    "client %s: storing its adapter failed (%s)", self.id, type(exc).__name__
                )
                return claim_service_pb2.OperationResult(
                    client=self.id,
                    lease=self.lease,
                    seq=seq,
                    ok=False,
                    code="ARTIFACT_UPLOAD_FAILED",
                    message="the adapter could not be stored",
                    seconds=seconds,
                )
        result = claim_service_pb2.OperationResult(
            client=self.id,
            lease=self.lease,
            seq=seq,
            ok=True,
            output=json.dumps(output, sort_keys=True),
            seconds=seconds,
        )
        if kind == "save_weights":
            self._saved[seq] = result
        return result

    def _store(self, saved: dict[str, Any]) -> dict[str, Any]:
        """Pack the adapter the engine wrote, register it and PUT its bytes (unless the org
        holds them already); what the caller sees of it."""
        directory = Path(str(saved["dir"]))
        name, step = str(saved["name"]), int(saved["step"])
        packed = self.work / f"lora-{directory.name}.tar"
        sha256, size = packing.pack_to_file(directory, packed)
        meta = {"client": self.id, "step": str(step), "base": self.base}
        deadline = time.monotonic() + self._patience
        delay = 0.5
        try:
            while True:
                try:
                    grant = self._register(self, name, sha256, size, meta)
                    if not grant.stored:
                        with (
                            httpx.Client(timeout=uploads.TIMEOUT, verify=self._verify) as http,
                            packed.open("rb") as fh,
                        ):
                            uploads.put(http, grant, fh)
                    break
                except LeaseLost:
                    raise
                except Exception as exc:
                    # classify raises LeaseLost for a lease the service no longer holds.
                    if classify(exc) is not None or time.monotonic() + delay > deadline:
                        raise
                    if self.closed:
                        raise
                    log.warning("client %s: storing its adapter failed; trying again", self.id)
                    time.sleep(delay)
                    delay = min(delay * 2, 10.0)
        finally:
            packed.unlink(missing_ok=True)
        kind = "state" if saved.get("kind") == "state" else "lora"
        return {
            "name": name,
            "sha256": sha256,
            "size": size,
            "step": step,
            "kind": kind,
            "optimizer": bool(saved.get("optimizer")),
        }

    # -- ending --------------------------------------------------------------------------

    def _engine_ended(self) -> None:
        """The engine died under the client: give the client back, once."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        code = self._process.poll() if self._process is not None else None
        log.warning("client %s: the engine ended (exit %s); releasing it", self.id, code)
        self._kill()
        release = claim_service_pb2.Release(task=self.id, lease=self.lease, reason="engine_failed")
        self._send(claim_service_pb2.ConnectRequest(release=release))

    def _emit(self, result: claim_service_pb2.OperationResult) -> None:
        if self.closed:
            return
        self._send(claim_service_pb2.ConnectRequest(result=result))

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)

    def _reap(self) -> None:
        """The worker's last act: no engine outlives it, and its pipes close."""
        process = self._process
        if process is None:
            return
        self._kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
