"""The executor agent: one stream to ClaimService through the gateway, a runner per task,
reports with per-task sequence numbers, heartbeats, cancels, and reconnection; the
training clients it holds are kept by `executor.agent.hosting`.

The stream is transport only. When it breaks, the agent reconnects with backoff and
names the leases it still holds in its hello; the service says which still stand, and
the runners resend whatever was not acknowledged (the service applies each seq once).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator

import grpc

from executor.agent import disk
from executor.agent.clients import ClientRunner
from executor.agent.config import AgentConfig
from executor.agent.held import HeldLeases
from executor.agent.hosting import ClientHosting
from executor.agent.journal import Journal
from executor.agent.runner import TaskRunner
from executor.agent.workdir import sweep, trainer_env
from executor.wire.metrics import ExecutorMetrics
from executor.wire.warm import WarmTrainer
from trainyard.artifact.v1 import artifact_pb2
from trainyard.channels import channel
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.training import events
from trainyard.training.events import Event
from trainyard.training.model_files import RESCAN_SECONDS

log = logging.getLogger(__name__)
TERMINAL = {"succeeded", "rejected", "failed", "cancelled", "stopped"}
# Ends a running task cannot reach by itself without reporting them first.
ENDED_BY_OTHERS = {"failed", "stopped", "cancelled"}
TICK = 0.25
CLIENT_PREFIX = "cli_"
BATCH_SECONDS = 1.0


def refusal(exc: grpc.RpcError) -> str:
    """Why the gateway refused the executor, in words that say what to give it."""
    code, details = exc.code(), exc.details() or ""  # type: ignore[attr-defined]
    if details.startswith("RBAC"):  # Envoy's own: the gateway asks for a certificate
        return (
            "it shows no client certificate the gateway's client CAs signed "
            "(--client-cert and --client-key)"
        )
    return f"its key ({code.name}: {details})"


class Agent(ClientHosting):
    """The executor's side of the stream: its tasks' runners here, the training clients
    it holds in `ClientHosting`."""

    def __init__(self, config: AgentConfig, metrics: ExecutorMetrics | None = None) -> None:
        self.config = config
        self.runners: dict[str, TaskRunner] = {}
        self.clients: dict[str, ClientRunner] = {}
        self.metrics = metrics or ExecutorMetrics()
        self.metrics.tasks_running.set_function(lambda: len(self.runners))
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # Set when a runner made an event that goes at once: the send loop wakes for it
        # rather than at its next tick.
        self._wake = threading.Event()
        self._channel = channel(config.url, config.tls)
        self._stub = claim_service_pb2_grpc.ClaimServiceStub(self._channel)
        self._journal = Journal(config.journal) if config.journal else None
        work = config.work_root / config.machine
        self.warm = WarmTrainer(config.trainer, work, trainer_env(work))
        self.connected = threading.Event()
        # The id the last welcome gave: a later hello names it (`Hello.previous`), so what
        # that session was leased and never got is given back.
        self._executor_id = ""
        self._bases_read_at = time.monotonic()
        # The live session's outbox; None between sessions.
        self._outbox: queue.Queue[claim_service_pb2.ConnectRequest | None] | None = None
        # The leases this process holds, on disk; and those the process before it held
        # when it ended, said in the hello until a welcome took them.
        self._held: HeldLeases | None = None
        self._abandoned: list[tuple[str, str]] = []

    def _md(self, org: str | None = None) -> list[tuple[str, str]]:
        md = [("authorization", f"Bearer {self.config.api_key}")]
        if org and self.config.platform:
            md.append(("x-org-id", org))
        return md

    # -- the connection loop -------------------------------------------------------------

    def run(self) -> None:
        """Stay connected until `stop()`; reconnect with backoff after any break."""
        self._held = HeldLeases(self.config.work_root / self.config.machine)
        self._abandoned = self._held.read()
        if self._abandoned:
            log.warning(
                "%d tasks were held when this executor last ended; they are reported lost",
                len(self._abandoned),
            )
        if self.config.warm:
            self.warm.start()
        threading.Thread(target=self._sweep_forever, name="sweep", daemon=True).start()
        try:
            self._connect()
        finally:
            self.warm.close()

    def _sweep_forever(self) -> None:
        """Remove what failed tasks (and an executor that crashed) left, at start and then
        every so often, once it is older than the configured time."""
        every = min(3600.0, max(self.config.failed_work_seconds / 4, 1.0))
        while not self.config.keep_work:
            with self._lock:
                held = {*self.runners, *self.clients}
            root = self.config.work_root / self.config.machine
            if removed := sweep(root, self.config.failed_work_seconds, held):
                log.info("removed %d work directories of ended tasks", removed)
            if self._stopping.wait(every):
                return

    def _connect(self) -> None:
        backoff = 0.5
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self._session()
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    log.error("the gateway refused this executor: %s; stopping", refusal(exc))
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
            machine=c.machine,
            platform=c.platform,
            bases=c.bases,
            devices=c.devices,
            slots=c.slots,
            supports=task_pb2.Supports(
                adaptations=c.adaptations, outputs=c.outputs, terms=c.terms, protect=c.protect
            ),
            leases=held,
            clients=c.clients,
            abandoned=[
                claim_service_pb2.HeldLease(task=task, lease=lease)
                for task, lease in self._abandoned
            ],
            previous=self._executor_id,
        )

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
            # Cleared before the runners are read: an event made from here on wakes the
            # wait below.
            self._wake.clear()
            now = time.monotonic()
            if self._bases_changed(now):
                announcement = claim_service_pb2.Announcement(bases=self.config.bases)
                outbox.put(claim_service_pb2.ConnectRequest(announcement=announcement))
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
                # Metrics and log lines go out in batches about once a second; a batch goes at
                # once when it is full, holds a status, an output or the result, or the run
                # has ended. An empty report is the heartbeat, every half interval.
                since = now - last_beat.get(runner.id, 0.0)
                heartbeat = max(1.0, runner.task.report / 2 or 10.0)
                full = runner.pending >= events.MAX_EVENTS
                due = full or runner.finished.is_set() or runner.urgent
                if since < BATCH_SECONDS and not due:
                    continue
                batch = runner.unsent()
                if batch or since >= heartbeat:
                    last_beat[runner.id] = now
                    if self._journal is not None:
                        self._note("sent", runner.id, batch, made=runner.made(batch))
                    report = claim_service_pb2.StreamReport(
                        task=runner.id,
                        lease=runner.lease,
                        events=[events.to_proto(e) for e in batch],
                    )
                    outbox.put(claim_service_pb2.ConnectRequest(report=report))
                    self.metrics.reports.inc()
                    self.metrics.events.inc(len(batch))
            self._wake.wait(TICK)

    def _bases_changed(self, now: float) -> bool:
        """Whether the bases this executor trains changed since it last said them (a model placed
        in or taken from its models directory), read at most every `RESCAN_SECONDS`."""
        read = self.config.bases_now
        if read is None or now - self._bases_read_at < RESCAN_SECONDS:
            return False
        self._bases_read_at = now
        bases = read()
        if bases == self.config.bases:
            return False
        log.info("the bases this executor trains changed; announcing them again")
        self.config.bases = bases
        return True

    def _dispatch(self, message: claim_service_pb2.ConnectResponse) -> None:
        kind = message.WhichOneof("kind")
        if kind == "welcome":
            welcome = message.welcome
            # One line a session, so whoever started the executor sees it is serving (and
            # that it came back after a break) without reading metrics.
            log.info(
                "%s to %s as executor %s (machine %s); %d tasks resumed, %d lost",
                "reconnected" if self._executor_id else "connected",
                self.config.url,
                welcome.executor_id,
                self.config.machine,
                len(welcome.resumed),
                len(welcome.lost),
            )
            self._executor_id = welcome.executor_id
            with self._lock:
                self._abandoned = []
                self._remember()
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
        task_id, base_model = assignment.task.id, assignment.job.base_model
        self._note("assigned", task_id, job=assignment.job.id)
        work = self.config.work_root / self.config.machine
        runner = TaskRunner(
            assignment,
            work,
            self.config.trainer,
            self._register,
            self._read_input,
            patience=self.config.patience_seconds,
            warm=self.warm,
            refusal=disk.refusal(
                work,
                self.config.base_size(base_model) + self.config.disk_margin_bytes,
                self.config.work_budget_bytes,
                base_model,
            ),
            verify=self.config.tls.context,
            wake=self._wake.set,
            note=lambda what, **fields: self._note(what, task_id, **fields),
        )
        with self._lock:
            self.runners[runner.id] = runner
            self._remember()
        runner.start()

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

    def _remember(self) -> None:
        """Keep on disk the leases this process holds (under `_lock`)."""
        if self._held is not None:
            self._held.write([*((r.id, r.lease) for r in self.runners.values()), *self._abandoned])

    def _drop(self, task_id: str, *, kill: bool) -> None:
        with self._lock:
            runner = self.runners.pop(task_id, None)
            self._remember()
        if runner is None:
            return
        if kill:
            runner.kill()
        if not self.config.keep_work:
            threading.Thread(target=runner.discard, name=f"discard-{task_id}", daemon=True).start()

    def _register(
        self, runner: TaskRunner, kind: str, name: str, sha256: str, size: int, meta: dict[str, str]
    ) -> artifact_pb2.Grant:
        request = claim_service_pb2.RegisterTaskArtifactRequest(
            id=runner.job.id,
            task=runner.id,
            lease=runner.lease,
            kind=kind,
            name=name,
            sha256=sha256,
            size=size,
            meta=meta,
        )
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
        made: list[float] | None = None,
        **fields: object,
    ) -> None:
        if self._journal is not None:
            self._journal.note(what, task_id, sent, made or (), **fields)
