"""One task on the executor: its trainer subprocess, the events it emits numbered in
order, its output packed and uploaded under a grant, and a cooperative cancel."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import grpc
import httpx
from google.protobuf import json_format

from executor import protocol
from executor.protocol import TASK_FILE
from executor.warm import WarmTrainer
from trainyard import packing, uploads
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.sdk import TrainyardError
from trainyard.training import events
from trainyard.training.events import Event

log = logging.getLogger(__name__)
T = TypeVar("T")
# How long an output upload or an input read keeps trying through a store or gateway that
# does not answer; the lease stays held meanwhile, since heartbeats go on.
PATIENCE_SECONDS = 900.0

Register = Callable[["TaskRunner", str, str, str, int, dict[str, str]], artifact_pb2.Grant]
# A download of an object the task reads (its snapshot, a state to resume from).
ReadInput = Callable[["TaskRunner", str], artifact_pb2.Artifact]


class TaskFailed(Exception):
    """The task cannot go on; `code` is the failure the job reports."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class LeaseLost(Exception):
    """The service says the lease is no longer the task's: stop and say nothing more."""


def trainer_env(work_root: Path, task_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a trainer runs in: the executor's, with DeepSpeed's built ops kept
    under the work root (built once, not once per task), and the task's own variables."""
    env = {**os.environ, **(task_env or {})}
    env.setdefault("TORCH_EXTENSIONS_DIR", str(work_root / "torch_extensions"))
    return env


def classify(exc: BaseException) -> str | None:
    """None for a failure a later try may not meet (a store or gateway that does not
    answer, a grant whose signature lapsed); "" for a refusal that stands; or the failure
    code of a refusal that has its own. LEASE_LOST raises `LeaseLost`."""
    if isinstance(exc, grpc.RpcError):
        error = TrainyardError.from_rpc(exc)
        if error.reason == "LEASE_LOST":
            raise LeaseLost() from exc
        if error.reason == "PENDING_LIMIT":
            return "artifact_pending_limit"
        transient = ("UNAVAILABLE", "CONFLICT", "INTERNAL_ERROR", "DEADLINE_EXCEEDED", "UNKNOWN")
        return None if error.reason in transient else ""
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return None if code >= 500 or code in (403, 408, 429) else ""
    if isinstance(exc, httpx.TransportError | uploads.Mismatch):
        return None
    return "executor_failed"


class TaskRunner:
    """Runs one assignment; the agent sends its events and feeds back acknowledgements."""

    def __init__(
        self,
        assignment: claim_service_pb2.Assignment,
        work_root: Path,
        trainer: str,
        register: Register,
        read_input: ReadInput | None = None,
        env: dict[str, str] | None = None,
        patience: float = PATIENCE_SECONDS,
        warm: WarmTrainer | None = None,
    ) -> None:
        """`warm`, when given, may hand over a trainer process started ahead, its imports
        done or under way; without it, or when it has none alive, the trainer starts cold."""
        self.org = assignment.org
        self.task: task_pb2.Task = assignment.task
        self.job: job_pb2.Job = assignment.job
        self.work = work_root / self.task.id
        self._trainer, self._register, self._read_input = trainer, register, read_input
        self._env = trainer_env(work_root, env)
        self._patience, self._warm = patience, warm
        self._lock = threading.Lock()
        self._events: list[Event] = []
        # When each event was made (monotonic), for the report lag.
        self._made: list[float] = []
        self.acked = 0
        self._sent = 0
        self._refusals = 0
        self._hold_until = 0.0
        self.finished = threading.Event()
        self.lost = False
        self._process: subprocess.Popen[str] | None = None
        self._cancelled = False
        self._output_sha = ""
        self._state_sha = ""
        self._thread = threading.Thread(target=self._run, name=f"task-{self.task.id}", daemon=True)

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def lease(self) -> str:
        return self.task.lease

    def start(self) -> None:
        self._thread.start()

    # -- events --------------------------------------------------------------------------

    def _add(self, event: Event) -> None:
        """Number the event after the task's others and keep it until acknowledged."""
        with self._lock:
            self._events.append(dataclasses.replace(event, seq=len(self._events) + 1))
            self._made.append(time.monotonic())

    def unsent(self) -> list[Event]:
        """Events not yet sent on this connection (after a reconnect, all unacknowledged);
        none while a refused report waits to be sent again."""
        with self._lock:
            if time.monotonic() < self._hold_until:
                return []
            start = max(self._sent, self.acked)
            batch = self._events[start : start + events.MAX_EVENTS]
            self._sent = start + len(batch)
            return batch

    @property
    def pending(self) -> int:
        """Events made and not yet sent."""
        with self._lock:
            return len(self._events) - max(self._sent, self.acked)

    def rewind(self, *, backoff: bool = False) -> None:
        """Resend everything not acknowledged: at once on a new connection, or after a
        pause that doubles with each refusal in a row (`backoff`)."""
        with self._lock:
            self._sent = self.acked
            if backoff:
                self._refusals += 1
                pause = min(30.0, 0.5 * 2 ** min(self._refusals, 6))
                self._hold_until = time.monotonic() + pause

    def acknowledge(self, seq: int) -> list[float]:
        """Mark the events through `seq` committed; the seconds each newly committed one
        waited since it was made (none for an acknowledgement already had)."""
        now = time.monotonic()
        with self._lock:
            waited = [now - made for made in self._made[self.acked : seq]]
            self.acked = max(self.acked, seq)
            self._refusals = 0
            return waited

    @property
    def drained(self) -> bool:
        """The trainer ended and every event it produced is acknowledged."""
        with self._lock:
            return self.finished.is_set() and self.acked >= len(self._events)

    # -- the trainer ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._train()
        except LeaseLost:
            log.warning("task %s: the lease is lost; stopping it", self.task.id)
            self.kill()
        except TaskFailed as exc:
            log.warning("task %s failed: %s", self.task.id, exc.code)
            self._end_trainer()
            self._add(events.Status("failed", exc.code))
        except Exception:
            log.exception("task %s failed in the executor", self.task.id)
            self._end_trainer()
            self._add(events.Status("failed", "executor_failed"))
        finally:
            self.finished.set()

    def _train(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        task = json_format.MessageToDict(self.task, preserving_proto_field_name=True)
        task.pop("lease", None)  # the trainer never needs the lease
        spec: dict[str, object] = {
            "job": json_format.MessageToDict(self.job, preserving_proto_field_name=True),
            "task": task,
            "org": self.org,
            "output_dir": str(self.work / "output"),
        }
        if self.task.snapshot:
            # The built-in fixture can be rebuilt where a job predates its snapshot object.
            optional = self.job.dataset.uri.startswith("fixture:")
            if (data := self._input(self.task.snapshot, optional=optional)) is not None:
                snapshot = self.work / "snapshot.jsonl"
                snapshot.write_bytes(data)
                spec["snapshot_path"] = str(snapshot)
        origin = str(getattr(self.job, "from"))
        if origin and not self.task.resume_from:
            # The adapter the job starts from; a resumed attempt's state already holds it.
            adapter = self.work / "init_adapter"
            data = self._input(origin)
            assert data is not None
            packing.unpack(io.BytesIO(data), adapter)
            spec["init_adapter_dir"] = str(adapter)
        if self.task.resume_from:
            resume = self.work / "resume"
            state = self._input(self.task.resume_from)
            assert state is not None
            packing.unpack(io.BytesIO(state), resume)
            spec["resume_dir"] = str(resume)
        (self.work / TASK_FILE).write_text(json.dumps(spec))
        argv, trainer_log = [str(self.work / TASK_FILE)], self.work / "trainer.log"
        with open(trainer_log, "w") as stderr, self._lock:
            if not self._cancelled:  # a cancel while the inputs were read: nothing runs
                warm = (
                    self._warm.take(self._trainer, argv, self.work, self._env, trainer_log)
                    if self._warm
                    else None
                )
                self._process = warm or subprocess.Popen(
                    [sys.executable, "-m", self._trainer, *argv],
                    cwd=self.work,
                    env=self._env,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                    start_new_session=True,
                )
        if self._process is None:
            self._add(events.Status("cancelled"))
            return
        assert self._process.stdout is not None
        ended = False
        for line in self._process.stdout:
            if self.lost:
                break
            ended = self._handle(line) or ended
        code = self._process.wait()
        if not ended and not self.lost:
            if self._cancelled:
                # Asked to stop before it could say how it ended (a SIGTERM that came
                # before the trainer set its handler ends it at once): it was cancelled.
                self._add(events.Status("cancelled"))
            else:
                self._add(
                    events.Status("failed", "trainer_failed" if code else "trainer_no_result")
                )

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
                if optional and TrainyardError.from_rpc(exc).reason == "NOT_FOUND":
                    return None
                raise
            with httpx.Client(timeout=uploads.TIMEOUT) as http:
                return uploads.get(http, artifact)

        return self._patiently("reading an input", read, "input_unavailable")

    def _handle(self, line: str) -> bool:
        """Turn one trainer line into events; True once the run has ended."""
        match protocol.read(line):
            case events.Status() as status:
                self._add(status)
                return status.ends_run
            case protocol.Output(path=path, step=step):
                kind, name = self.job.output.kind, self.job.output.name
                self._output_sha = self._upload(path, kind, name, step)
            case protocol.State(path=path, step=step):
                name = f"{self.job.output.name}-state"[:128]
                self._state_sha = self._upload(path, "checkpoint", name, step)
            case events.Result() as result:
                # The run's output and state are what this executor uploaded.
                self._add(
                    dataclasses.replace(
                        result, sha256=self._output_sha, checkpoint_sha256=self._state_sha
                    )
                )
                return True
            case events.Event() as event:
                self._add(event)
        return False

    def _upload(self, directory: Path, kind: str, name: str, step: int) -> str:
        """Pack a directory, ask for a grant, PUT it, and name it in an `artifact` event.
        An org that holds the bytes already answers `stored`: nothing is sent."""
        packed = self.work / f"{kind}-{step}.tar"
        sha256, size = packing.pack_to_file(directory, packed)

        def send() -> None:
            grant = self._register(self, kind, name, sha256, size, {"step": str(step)})
            if not grant.stored:
                with httpx.Client(timeout=uploads.TIMEOUT) as http, packed.open("rb") as fh:
                    uploads.put(http, grant, fh)

        self._patiently(f"storing its {kind}", send, "artifact_upload_failed")
        packed.unlink(missing_ok=True)
        self._add(events.Artifact(sha256))
        return sha256

    # -- stopping ------------------------------------------------------------------------

    def cancel(self, grace: float) -> None:
        """Ask the trainer to stop cooperatively; kill it if it has not after `grace`. A
        trainer not started yet never starts."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            if self._process is None or self._process.poll() is not None:
                return
        self._signal(signal.SIGTERM)

        def deadline() -> None:
            time.sleep(grace)
            if self._process is not None and self._process.poll() is None:
                self._signal(signal.SIGKILL)

        threading.Thread(target=deadline, daemon=True).start()

    def _end_trainer(self) -> None:
        """The task failed around its trainer: the trainer goes too."""
        self._signal(signal.SIGKILL)
        if self._process is not None:
            self._process.wait()

    def kill(self) -> None:
        """The lease is gone: stop at once and report nothing more."""
        self.lost = True
        self._signal(signal.SIGKILL)
        self.finished.set()

    def _signal(self, sig: int) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, sig)
