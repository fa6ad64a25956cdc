"""One task on the executor: its trainer subprocess, the events it emits numbered in
order, its output packed and uploaded under a grant, and a cooperative cancel."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from google.protobuf import json_format

from executor.protocol import TASK_FILE
from trainyard import packing
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2

log = logging.getLogger(__name__)
MAX_BATCH = 500
LOG_BYTES = 4096

Register = Callable[["TaskRunner", str, str, str, int, dict[str, str]], artifact_pb2.Grant]
# Reads an object of the task's org (an uploaded dataset, a state to resume), verified.
Fetch = Callable[["TaskRunner", str], bytes]


class TaskRunner:
    """Runs one assignment; the agent sends its events and feeds back acknowledgements."""

    def __init__(
        self,
        assignment: claim_service_pb2.Assignment,
        work_root: Path,
        trainer: str,
        register: Register,
        fetch: Fetch | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.org = assignment.org
        self.task: task_pb2.Task = assignment.task
        self.job: job_pb2.Job = assignment.job
        self.work = work_root / self.task.id
        self._trainer, self._register, self._fetch, self._env = trainer, register, fetch, env or {}
        self._lock = threading.Lock()
        self._events: list[task_pb2.TaskEvent] = []
        self.acked = 0
        self._sent = 0
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

    def _add(self, **fields: Any) -> None:
        with self._lock:
            event = task_pb2.TaskEvent(seq=len(self._events) + 1, **fields)
            self._events.append(event)

    def unsent(self) -> list[task_pb2.TaskEvent]:
        """Events not yet sent on this connection (after a reconnect, all unacknowledged)."""
        with self._lock:
            start = max(self._sent, self.acked)
            batch = self._events[start : start + MAX_BATCH]
            self._sent = start + len(batch)
            return batch

    @property
    def pending(self) -> int:
        """Events made and not yet sent."""
        with self._lock:
            return len(self._events) - max(self._sent, self.acked)

    def rewind(self) -> None:
        """A new connection: resend everything not acknowledged."""
        with self._lock:
            self._sent = self.acked

    def acknowledge(self, seq: int) -> None:
        with self._lock:
            self.acked = max(self.acked, seq)

    @property
    def drained(self) -> bool:
        """The trainer ended and every event it produced is acknowledged."""
        with self._lock:
            return self.finished.is_set() and self.acked >= len(self._events)

    # -- the trainer ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._train()
        except Exception:
            log.exception("task %s failed in the executor", self.task.id)
            self._add(type="status", status="failed", error="executor_failed")
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
        uri = self.job.dataset.uri
        if uri.startswith("artifact:") and self._fetch is not None:
            rows = self.work / "rows.jsonl"
            rows.write_bytes(self._fetch(self, uri.split(":", 1)[1]))
            spec["rows_path"] = str(rows)
        if self.task.resume_from and self._fetch is not None:
            resume = self.work / "resume"
            packing.unpack(io.BytesIO(self._fetch(self, self.task.resume_from)), resume)
            spec["resume_dir"] = str(resume)
        (self.work / TASK_FILE).write_text(json.dumps(spec))
        with open(self.work / "trainer.log", "w") as stderr:
            self._process = subprocess.Popen(
                [sys.executable, "-m", self._trainer, str(self.work / TASK_FILE)],
                cwd=self.work,
                env={**os.environ, **self._env},
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
            assert self._process.stdout is not None
            ended = False
            for line in self._process.stdout:
                if self.lost:
                    break
                ended = self._handle(line) or ended
            code = self._process.wait()
        if not ended and not self.lost:
            self._add(
                type="status",
                status="failed",
                error="trainer_failed" if code else "trainer_no_result",
            )

    def _handle(self, line: str) -> bool:
        """Turn one trainer line into events; True once the run has ended."""
        try:
            event = json.loads(line)
        except ValueError:
            self._add(type="log", line=line.encode()[:LOG_BYTES].decode(errors="ignore"))
            return False
        kind = event.get("type")
        if kind == "status":
            self._add(
                type="status",
                status=str(event.get("status", "")),
                error=str(event.get("error", "")),
            )
            return event.get("status") in ("cancelled", "failed", "stopped", "done")
        if kind == "coordinator":
            self._add(type="coordinator", addr=str(event["addr"]))
        elif kind == "metric":
            self._add(
                type="metric",
                name=str(event["name"]),
                step=int(event["step"]),
                value=float(event["value"]),
            )
        elif kind == "log":
            self._add(
                type="log",
                line=str(event.get("line", "")).encode()[:LOG_BYTES].decode(errors="ignore"),
            )
        elif kind == "output":
            self._output_sha = self._upload(
                Path(event["path"]),
                self.job.output.kind,
                self.job.output.name,
                int(event.get("step", 0)),
            )
        elif kind == "state":
            self._state_sha = self._upload(
                Path(event["path"]),
                "checkpoint",
                f"{self.job.output.name}-state"[:128],
                int(event.get("step", 0)),
            )
        elif kind == "result":
            result = task_pb2.TaskResult(
                sha256=self._output_sha,
                base_sha256=str(event.get("base_sha256", "")),
                step=int(event.get("step", 0)),
                served_step=int(event.get("served_step", 0)),
                checkpoint_step=int(event.get("checkpoint_step", 0)),
                dataset_sha256=str(event.get("dataset_sha256", "")),
                checkpoint_sha256=self._state_sha,
                training_seconds=float(event.get("training_seconds", 0.0)),
            )
            if event.get("evaluation") is not None:
                json_format.ParseDict(event["evaluation"], result.evaluation)
            if event.get("outcome") is not None:
                json_format.ParseDict(event["outcome"], result.outcome)
            self._add(type="result", result=result)
            return True
        return False

    def _upload(self, directory: Path, kind: str, name: str, step: int) -> str:
        """Pack a directory, ask for a grant, PUT it, and name it in an `artifact` event."""
        packed = self.work / f"{kind}-{step}.tar"
        sha256, size = packing.pack_to_file(directory, packed)
        grant = self._register(self, kind, name, sha256, size, {"step": str(step)})
        if not grant.stored:
            parts = (
                [(0, size, grant.upload.url, dict(grant.upload.headers))]
                if grant.HasField("upload")
                else [(p.offset, p.size, p.url, dict(p.headers)) for p in grant.parts]
            )
            with (
                httpx.Client(timeout=httpx.Timeout(60.0, read=600.0)) as http,
                packed.open("rb") as fh,
            ):
                for offset, length, url, headers in parts:
                    fh.seek(offset)
                    answer = http.put(url, content=fh.read(length), headers=headers)
                    answer.raise_for_status()
        packed.unlink(missing_ok=True)
        self._add(type="artifact", sha256=sha256)
        return sha256

    # -- stopping ------------------------------------------------------------------------

    def cancel(self, grace: float) -> None:
        """Ask the trainer to stop cooperatively; kill it if it has not after `grace`."""
        if self._cancelled or self._process is None or self._process.poll() is not None:
            return
        self._cancelled = True
        self._signal(signal.SIGTERM)

        def deadline() -> None:
            time.sleep(grace)
            if self._process is not None and self._process.poll() is None:
                self._signal(signal.SIGKILL)

        threading.Thread(target=deadline, daemon=True).start()

    def kill(self) -> None:
        """The lease is gone: stop at once and report nothing more."""
        self.lost = True
        self._signal(signal.SIGKILL)
        self.finished.set()

    def _signal(self, sig: int) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, sig)
