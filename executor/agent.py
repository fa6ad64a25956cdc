"""The executor agent: one stream to ClaimService through the gateway, a runner per task,
reports with per-task sequence numbers, heartbeats, cancels, and reconnection.

The stream is transport only. When it breaks, the agent reconnects with backoff and
names the leases it still holds in its hello; the service says which still stand, and
the runners resend whatever was not acknowledged (the service applies each seq once).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from executor.clients import ClientRunner
from executor.metrics import ExecutorMetrics
from executor.runner import PATIENCE_SECONDS, TaskRunner, trainer_env
from executor.warm import WarmTrainer
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.sdk_base import channel
from trainyard.training import events
from trainyard.training.events import Event, Metric

log = logging.getLogger(__name__)
TERMINAL = {"succeeded", "rejected", "failed", "cancelled", "stopped"}
# Ends a running task cannot reach by itself without reporting them first.
ENDED_BY_OTHERS = {"failed", "stopped", "cancelled"}
TICK = 0.25
CLIENT_PREFIX = "cli_"
BATCH_SECONDS = 1.0


@dataclasses.dataclass
class AgentConfig:
    url: str
    api_key: str
    machine: str = dataclasses.field(
        default_factory=lambda: socket.gethostname().split(".")[0].lower()
    )
    devices: tuple[str, ...] = ("cpu",)
    platform: bool = False
    slots: int = 1
    trainer: str = "executor.train"
    work_root: Path = Path(".trainyard/executor")
    bases: tuple[str, ...] = ("fixture-tiny-llm",)
    # What the trainer (executor.train) runs: the language models' and the decision base's.
    adaptations: tuple[str, ...] = ("full", "lora", "readout")
    outputs: tuple[str, ...] = ("checkpoint", "lora", "capability")
    terms: tuple[str, ...] = ("pairwise_margin", "hard_margin", "consistency")
    protect: tuple[str, ...] = ("suites", "projection", "distillation")
    # How long an upload or an input read keeps trying through a store that does not answer.
    patience_seconds: float = PATIENCE_SECONDS
    # Append every event sent and every acknowledgement to this file (for audits of the wire).
    journal: Path | None = None
    # Training clients held at once (each an engine subprocess); 0 serves none.
    clients: int = 0
    # Keep a trainer process ready with its imports done, for the next task to start in.
    warm: bool = True


class Agent:
    def __init__(self, config: AgentConfig, metrics: ExecutorMetrics | None = None) -> None:
        self.config = config
        self.runners: dict[str, TaskRunner] = {}
        self.clients: dict[str, ClientRunner] = {}
        self.metrics = metrics or ExecutorMetrics()
        self.metrics.tasks_running.set_function(lambda: len(self.runners))
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._channel = channel(config.url)
        self._stub = claim_service_pb2_grpc.ClaimServiceStub(self._channel)
        self._journal = config.journal.open("a") if config.journal else None
        work = config.work_root / config.machine
        self.warm = WarmTrainer(config.trainer, work, trainer_env(work))
        self.connected = threading.Event()
        self._welcomed = False  # a later welcome is a reconnection
        # The live session's outbox; None between sessions.
        self._outbox: queue.Queue[claim_service_pb2.ConnectRequest | None] | None = None

    def _md(self, org: str | None = None) -> list[tuple[str, str]]:
        md = [("authorization", f"Bearer {self.config.api_key}")]
        if org and self.config.platform:
            md.append(("x-org-id", org))
        return md

    # -- the connection loop -------------------------------------------------------------

    def run(self) -> None:
        """Stay connected until `stop()`; reconnect with backoff after any break."""
        if self.config.warm:
            self.warm.start()
        try:
            self._connect()
        finally:
            self.warm.close()

    def _connect(self) -> None:
        backoff = 0.5
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self._session()
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    log.error("the gateway refused this executor's key (%s); stopping", code.name)
                    raise
                log.warning("stream to the claim service broke (%s); reconnecting", code.name)
            self.connected.clear()
            self.metrics.connected.set(0)
            if time.monotonic() - started > 10:
                backoff = 0.5
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, 10.0)

    def stop(self, drain_seconds: float = 30.0) -> None:
        """Stop cooperatively: each trainer saves and reports what it trained, then the
        stream closes (after `drain_seconds` at most). The warm trainer ends at once."""
        self.warm.close()

        def drain() -> None:
            with self._lock:
                runners = list(self.runners.values())
                clients = list(self.clients.values())
                self.clients.clear()
            for client in clients:
                client.close()
            for runner in runners:
                runner.cancel(grace=drain_seconds / 2)
            deadline = time.monotonic() + drain_seconds
            while self.runners and time.monotonic() < deadline:
                time.sleep(TICK)
            self._stopping.set()
            self._channel.close()

        threading.Thread(target=drain, name="drain", daemon=True).start()

    def _session(self) -> None:
        outbox: queue.Queue[claim_service_pb2.ConnectRequest | None] = queue.Queue()
        with self._lock:
            for runner in self.runners.values():
                runner.rewind()
            held = [
                claim_service_pb2.HeldLease(task=r.id, lease=r.lease)
                for r in self.runners.values()
                if not r.lost
            ]
            # A client held is resumed by naming its lease like a task's.
            held += [
                claim_service_pb2.HeldLease(task=c.id, lease=c.lease)
                for c in self.clients.values()
                if not c.closed
            ]
        c = self.config
        hello = claim_service_pb2.Hello(
            machine=c.machine, platform=c.platform, bases=c.bases, devices=c.devices, slots=c.slots,
            supports=task_pb2.Supports(
                adaptations=c.adaptations, outputs=c.outputs, terms=c.terms, protect=c.protect
            ),
            leases=held, clients=c.clients,
        )  # fmt: skip

        def requests() -> Iterator[claim_service_pb2.ConnectRequest]:
            yield claim_service_pb2.ConnectRequest(hello=hello)
            while (message := outbox.get()) is not None:
                yield message

        call = self._stub.Connect(requests(), metadata=self._md())
        sender = threading.Thread(target=self._send_loop, args=(outbox, call), daemon=True)
        sender.start()
        with self._lock:
            self._outbox = outbox
        try:
            for message in call:
                self._dispatch(message)
        finally:
            with self._lock:
                self._outbox = None
            outbox.put(None)
            call.cancel()

    def _post(self, message: claim_service_pb2.ConnectRequest) -> None:
        """Put a client's message on the live stream; between sessions it is dropped (the
        service sends again the operations it has no answer to)."""
        with self._lock:
            outbox = self._outbox
        if outbox is not None:
            outbox.put(message)

    def _send_loop(
        self, outbox: queue.Queue[claim_service_pb2.ConnectRequest | None], call: grpc.Future
    ) -> None:
        last_beat: dict[str, float] = {}
        while not call.done() and not self._stopping.is_set():
            now = time.monotonic()
            with self._lock:
                runners = list(self.runners.values())
                # A client whose engine died was given back (released): it is forgotten.
                for gone in [c.id for c in self.clients.values() if c.closed]:
                    del self.clients[gone]
                clients = list(self.clients.values())
            for client in clients:
                # A client reports no events: an empty report is its heartbeat.
                if now - last_beat.get(client.id, 0.0) < max(1.0, client.report / 2 or 10.0):
                    continue
                last_beat[client.id] = now
                beat = claim_service_pb2.StreamReport(task=client.id, lease=client.lease)
                outbox.put(claim_service_pb2.ConnectRequest(report=beat))
                self.metrics.reports.inc()
            for runner in runners:
                if runner.lost:
                    continue
                # Events go out in batches about once a second (at once when a batch is full or
                # the run has ended); an empty report is the heartbeat, every half interval.
                since = now - last_beat.get(runner.id, 0.0)
                heartbeat = max(1.0, runner.task.report / 2 or 10.0)
                full = runner.pending >= events.MAX_EVENTS
                if since < BATCH_SECONDS and not runner.finished.is_set() and not full:
                    continue
                batch = runner.unsent()
                if batch or since >= heartbeat:
                    last_beat[runner.id] = now
                    self._note("sent", runner.id, batch)
                    report = claim_service_pb2.StreamReport(
                        task=runner.id,
                        lease=runner.lease,
                        events=[events.to_proto(e) for e in batch],
                    )
                    outbox.put(claim_service_pb2.ConnectRequest(report=report))
                    self.metrics.reports.inc()
                    self.metrics.events.inc(len(batch))
            time.sleep(TICK)

    def _dispatch(self, message: claim_service_pb2.ConnectResponse) -> None:
        kind = message.WhichOneof("kind")
        if kind == "welcome":
            welcome = message.welcome
            # One line a session, so whoever started the executor sees it is serving (and
            # that it came back after a break) without reading metrics.
            log.info(
                "%s to %s as executor %s (machine %s); %d tasks resumed, %d lost",
                "reconnected" if self._welcomed else "connected", self.config.url,
                welcome.executor_id, self.config.machine, len(welcome.resumed), len(welcome.lost),
            )  # fmt: skip
            self._welcomed = True
            self.connected.set()
            self.metrics.connected.set(1)
            for task_id in message.welcome.lost:
                self._drop(task_id, kill=True)
                self._drop_client(task_id)
        elif kind == "assignment":
            self._start(message.assignment)
        elif kind == "operation":
            self._operate(message.operation)
        elif kind == "ack":
            self._ack(message.ack)
        elif kind == "cancel" and message.cancel.task.startswith(CLIENT_PREFIX):
            self._drop_client(message.cancel.task)
        elif kind == "cancel":
            runner = self.runners.get(message.cancel.task)
            if runner is not None:
                runner.cancel(grace=float(message.cancel.grace or 60))

    def _start(self, assignment: claim_service_pb2.Assignment) -> None:
        log.info(
            "task %s of job %s: %s", assignment.task.id, assignment.job.id, assignment.task.role
        )
        work = self.config.work_root / self.config.machine
        runner = TaskRunner(
            assignment, work, self.config.trainer, self._register, self._read_input,
            patience=self.config.patience_seconds, warm=self.warm,
        )  # fmt: skip
        with self._lock:
            self.runners[runner.id] = runner
        runner.start()

    def _operate(self, op: claim_service_pb2.ClientOperation) -> None:
        """A client's operation: `create` loads it in a new engine; the others go to the
        engine that holds it, in the order they came."""
        with self._lock:
            client = self.clients.get(op.client)
            if client is not None and client.closed:
                # Its engine died and it was given back: a new create starts it afresh.
                del self.clients[op.client]
                client = None
            if client is None and op.kind == "create":
                log.info("client %s: loading it", op.client)
                work = self.config.work_root / self.config.machine
                client = ClientRunner(op, work, self._post, self._register_client)
                self.clients[op.client] = client
                client.start()
                return
        if client is None:
            log.warning("client %s: an operation for a client not held here; ignored", op.client)
            return
        client.submit(op.seq, op.kind, op.input, op.lease)

    def _drop_client(self, client_id: str) -> None:
        with self._lock:
            client = self.clients.pop(client_id, None)
        if client is not None:
            log.info("client %s: dropped", client_id)
            client.close()

    def _register_client(
        self, client: ClientRunner, name: str, sha256: str, size: int, meta: dict[str, str]
    ) -> artifact_pb2.Grant:
        request = claim_service_pb2.RegisterTaskArtifactRequest(
            id=client.id, task=client.id, lease=client.lease, kind="lora", name=name,
            sha256=sha256, size=size, meta=meta,
        )  # fmt: skip
        return self._stub.RegisterTaskArtifact(request, metadata=self._md(client.org), timeout=120)

    def _ack(self, ack: claim_service_pb2.Ack) -> None:
        if ack.task in self.clients:
            if ack.reason in ("LEASE_LOST", "NOT_FOUND", "PERMISSION_DENIED") or ack.cancel:
                log.warning("client %s: %s; dropping it", ack.task, ack.reason or "cancelled")
                self._drop_client(ack.task)
            return
        runner = self.runners.get(ack.task)
        if runner is None:
            return
        if ack.reason:
            if ack.reason in ("LEASE_LOST", "NOT_FOUND", "PERMISSION_DENIED"):
                log.warning("task %s: %s; stopping it", ack.task, ack.reason)
                self._drop(ack.task, kill=True)
            else:
                # Refused for now (a store down behind the service): the lease was renewed;
                # the events go again after a pause that grows while refusals last.
                log.warning("task %s: a report was refused (%s)", ack.task, ack.reason)
                runner.rewind(backoff=True)
            return
        for waited in runner.acknowledge(ack.seq):
            self.metrics.report_lag.observe(waited)
        self._note("acked", ack.task, seq=ack.seq, status=ack.status)
        if ack.cancel:
            runner.cancel(grace=60)
        if ack.status in ENDED_BY_OTHERS and not runner.finished.is_set():
            # The job ended without this task (it failed elsewhere, or lost its lease):
            # its trainer has nothing left to do.
            log.warning("task %s: the job is %s; stopping it", ack.task, ack.status)
            self._drop(ack.task, kill=True)
        elif runner.drained or (ack.status in TERMINAL and runner.finished.is_set()):
            self._drop(ack.task, kill=False)

    def _drop(self, task_id: str, *, kill: bool) -> None:
        with self._lock:
            runner = self.runners.pop(task_id, None)
        if runner is not None and kill:
            runner.kill()

    def _register(
        self, runner: TaskRunner, kind: str, name: str, sha256: str, size: int, meta: dict[str, str]
    ) -> artifact_pb2.Grant:
        request = claim_service_pb2.RegisterTaskArtifactRequest(
            id=runner.job.id, task=runner.id, lease=runner.lease, kind=kind, name=name, sha256=sha256, size=size,
            meta=meta,
        )  # fmt: skip
        return self._stub.RegisterTaskArtifact(request, metadata=self._md(runner.org), timeout=120)

    def _read_input(self, runner: TaskRunner, sha256: str) -> artifact_pb2.Artifact:
        request = claim_service_pb2.ReadTaskInputRequest(
            id=runner.job.id, task=runner.id, lease=runner.lease, sha256=sha256
        )
        return self._stub.ReadTaskInput(request, metadata=self._md(runner.org), timeout=60)

    def _note(
        self,
        what: str,
        task_id: str,
        sent: list[Event] | None = None,
        **fields: object,
    ) -> None:
        if self._journal is None or (what == "sent" and not sent):
            return
        record: dict[str, object] = {"what": what, "task": task_id, **fields}
        if sent:
            # [seq, type, series, step]: a metric's, or "" and null.
            record["events"] = [
                [e.seq, e.type, e.name, e.step]
                if isinstance(e, Metric)
                else [e.seq, e.type, "", None]
                for e in sent
            ]
        self._journal.write(json.dumps(record) + "\n")
        self._journal.flush()
