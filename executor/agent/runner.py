"""One task on the executor: its trainer subprocess, the events it emits numbered in
order, its log reported as it grows, and a cooperative cancel; its inputs read and its
output packed and uploaded under a grant are in `executor.agent.transfers`."""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from google.protobuf import json_format

from executor.agent import pinned
from executor.agent.failures import LeaseLost, TaskFailed
from executor.agent.transfers import PATIENCE_SECONDS, Transfers
from executor.agent.workdir import discard, trainer_env
from executor.wire import protocol
from executor.wire.protocol import TASK_FILE
from executor.wire.warm import WarmTrainer
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training import events
from trainyard.training.events import Event

log = logging.getLogger(__name__)
# How often the trainer's log is read for what it added, to report as the attempt's log.
LOG_READ_SECONDS = 0.5
# The most of it read at once.
LOG_READ_BYTES = 1024 * 1024
# How long a trainer that has said how its run ended may take to exit before it is killed:
# its last words wait for its log, so a trainer that hangs on its way out would hold them.
EXIT_GRACE_SECONDS = 60.0

Register = Callable[["TaskRunner", str, str, str, int, dict[str, str]], artifact_pb2.Grant]
# A download of an object the task reads (its snapshot, a state to resume from).
ReadInput = Callable[["TaskRunner", str], artifact_pb2.Artifact]
# The events that wait for the next batch; any other is sent at once, and so are the
# metrics of the first step the trainer reports (the first sign that it trains).
BATCHED = (events.Metric, events.Log, events.Stdio)
# What the agent's journal is told of a task (`Agent._note`): what happened, and its fields.
Note = Callable[..., None]


class TaskRunner(Transfers):
    """Runs one assignment; the agent sends its events and feeds back acknowledgements.
    Its inputs and outputs travel through `Transfers`."""

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
        refusal: str = "",
        verify: ssl.SSLContext | bool = True,
        wake: Callable[[], None] = lambda: None,
        note: Note = lambda what, **fields: None,
    ) -> None:
        """`warm`, when given, may hand over a trainer process started ahead, its imports
        done or under way; without it, or when it has none alive, the trainer starts cold.
        A `refusal` (a failure code) fails the task before anything of it is written.
        `wake` is called when an event that goes at once is made; `note` tells the
        agent's journal when the trainer was handed the task."""
        self._wake, self._note = wake, note
        self._refusal = refusal
        self.org = assignment.org
        self.task: task_pb2.Task = assignment.task
        self.job: job_pb2.Job = assignment.job
        self.work = work_root / self.task.id
        self._trainer, self._register, self._read_input = trainer, register, read_input
        self._env = trainer_env(work_root, env)
        self._patience, self._warm = patience, warm
        # How the transfers verify an https:// gateway's download URLs.
        self._verify = verify
        self._lock = threading.Lock()
        self._events: list[Event] = []
        # When each event was made (monotonic), for the report lag.
        self._made: list[float] = []
        # The step of the first metric the trainer reported.
        self._first_step: int | None = None
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
        # The task reported `failed`: its directory keeps its log a while.
        self.failed = False
        # The trainer's log (stderr, and stdout lines that are not the protocol's), read
        # as it grows and reported as `stdio` events: the attempt's log.
        self._log_path = self.work / "trainer.log"
        self._log_read = 0
        self._log_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._log_lock = threading.Lock()
        # The events that end the run, held until the trainer's log is reported whole.
        self._last_words: list[Event] = []
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
        """Number the event after the task's others and keep it until acknowledged; wake
        the agent if it goes at once."""
        with self._lock:
            self._events.append(dataclasses.replace(event, seq=len(self._events) + 1))
            self._made.append(time.monotonic())
            if isinstance(event, events.Status) and event.status == "failed":
                self.failed = True
            if isinstance(event, events.Metric) and self._first_step is None:
                self._first_step = event.step
            urgent = self._urgent(event)
        if urgent:
            self._wake()

    def _urgent(self, event: Event) -> bool:
        if isinstance(event, events.Metric):
            return event.step == self._first_step
        return not isinstance(event, BATCHED)

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
    def urgent(self) -> bool:
        """An event not yet sent says where the run stands (a status, an output, its
        result): it goes out at once, not with the next batch of metrics and log lines."""
        with self._lock:
            unsent = self._events[max(self._sent, self.acked) :]
            return any(self._urgent(event) for event in unsent)

    def made(self, batch: list[Event]) -> list[float]:
        """When each event of `batch` was made, in seconds since the epoch."""
        with self._lock:
            made = [self._made[event.seq - 1] for event in batch]
        offset = time.time() - time.monotonic()
        return [round(offset + at, 4) for at in made]

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
            self._report_log(final=True)
            self._add(events.Status("failed", exc.code))
        except Exception:
            log.exception("task %s failed in the executor", self.task.id)
            self._end_trainer()
            self._report_log(final=True)
            self._add(events.Status("failed", "executor_failed"))
        finally:
            self.finished.set()

    def _train(self) -> None:
        if refusal := self._refusal or pinned.refusal(self.job, self._env):
            raise TaskFailed(refusal)
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
            spec["init_adapter_dir"] = str(self._unpacked(origin, self.work / "init_adapter"))
        if self.task.resume_from:
            spec["resume_dir"] = str(self._unpacked(self.task.resume_from, self.work / "resume"))
        (self.work / TASK_FILE).write_text(json.dumps(spec))
        argv, trainer_log = [str(self.work / TASK_FILE)], self._log_path
        # A fresh log, appended to, so the executor's writes to it land after the trainer's.
        trainer_log.unlink(missing_ok=True)
        warm = None
        with open(trainer_log, "a") as stderr, self._lock:
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
        self._note("handed", warm=warm is not None)
        assert self._process.stdout is not None
        following = threading.Thread(target=self._follow_log, daemon=True)
        following.start()
        ended = False
        for line in self._process.stdout:
            if self.lost:
                break
            if self._handle(line) and not ended:
                ended = True
                self._exit_within(EXIT_GRACE_SECONDS)
        code = self._process.wait()
        following.join()
        self._report_log(final=True)
        for event in self._last_words:
            self._add(event)
        if not ended and not self.lost:
            if self._cancelled:
                # Asked to stop before it could say how it ended (a SIGTERM that came
                # before the trainer set its handler ends it at once): it was cancelled.
                self._add(events.Status("cancelled"))
            else:
                self._add(
                    events.Status("failed", "trainer_failed" if code else "trainer_no_result")
                )

    # -- the attempt's log -----------------------------------------------------------------

    def _follow_log(self) -> None:
        """Report what the trainer's log gained, every LOG_READ_SECONDS while it runs."""
        process = self._process
        assert process is not None
        while process.poll() is None and not self.lost:
            self._report_log(final=False)
            time.sleep(LOG_READ_SECONDS)

    def _report_log(self, *, final: bool) -> None:
        """Report what the trainer's log gained since the last read as `stdio` events, in
        order; `final` once the trainer has ended: all of it, to its last byte."""
        with self._log_lock:
            while True:
                try:
                    with self._log_path.open("rb") as fh:
                        fh.seek(self._log_read)
                        data = fh.read(LOG_READ_BYTES)
                except FileNotFoundError:
                    data = b""
                self._log_read += len(data)
                text = self._log_decoder.decode(data, final=final and not data)
                for piece in events.Stdio.pieces(text):
                    self._add(piece)
                if not data or not final:
                    return

    def _write_log(self, line: str) -> None:
        """A trainer line that is not the protocol's goes in its log with its stderr."""
        with self._log_path.open("a") as fh:
            fh.write(line if line.endswith("\n") else line + "\n")

    def _handle(self, line: str) -> bool:
        """Turn one trainer line into events; True once the run has ended."""
        if not protocol.is_message(line):
            self._write_log(line)
        match protocol.read(line):
            case events.Status() as status if status.ends_run:
                self._last_words.append(status)
                return True
            case events.Status() as status:
                self._add(status)
            case protocol.Output(path=path, step=step):
                kind, name = self.job.output.kind, self.job.output.name
                self._output_sha = self._upload(path, kind, name, step)
            case protocol.State(path=path, step=step):
                name = f"{self.job.output.name}-state"[:128]
                self._state_sha = self._upload(path, "checkpoint", name, step)
            case events.Result() as result:
                # The run's output and state are what this executor uploaded.
                self._last_words.append(
                    dataclasses.replace(
                        result, sha256=self._output_sha, checkpoint_sha256=self._state_sha
                    )
                )
                return True
            case events.Event() as event:
                self._add(event)
        return False

    def discard(self) -> None:
        """Once the task is dropped (its events acknowledged, so its outputs read back from
        the store, or its lease gone): its work directory goes, when the trainer has."""
        if self._thread.ident is not None:
            self._thread.join()
        if self._process is not None:
            self._process.wait()
        discard(self.work, failed=self.failed or self.lost)

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

    def _exit_within(self, grace: float) -> None:
        """Kill the trainer if it is still there after `grace` seconds."""

        def deadline() -> None:
            time.sleep(grace)
            if self._process is not None and self._process.poll() is None:
                log.warning("task %s: the trainer ended its run but not its process", self.id)
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
