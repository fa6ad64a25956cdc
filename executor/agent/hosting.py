"""The training clients an executor holds (ClientService's calls, on the agent's stream):
a `create` loads one in a new engine, its other operations go to the engine that holds
it in the order they came, a dropped one closes, a saved adapter is registered under the
client's lease, and one it starts from is read under it."""

from __future__ import annotations

import logging
import threading

from executor.agent.clients import ClientRunner
from executor.agent.config import AgentConfig
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc

# Its lines keep the logger they had inside the agent.
log = logging.getLogger("executor.agent.agent")


class ClientHosting:
    """The training-client side of `Agent`, which sets what these read."""

    config: AgentConfig
    clients: dict[str, ClientRunner]
    _lock: threading.Lock
    _stub: claim_service_pb2_grpc.ClaimServiceStub

    def _md(self, org: str | None = None) -> list[tuple[str, str]]:
        raise NotImplementedError

    def _post(self, message: claim_service_pb2.ConnectRequest) -> None:
        raise NotImplementedError

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
                client = ClientRunner(
                    op,
                    work,
                    self._post,
                    self._register_client,
                    keep_work=self.config.keep_work,
                    read=self._read_client_input,
                    verify=self.config.tls.context,
                )
                self.clients[op.client] = client
                client.start()
                return
        if client is None:
            # The service counts it placed here: it is lost at once, its caller answered.
            log.warning(
                "client %s: an operation for a client not held here; disowning it", op.client
            )
            release = claim_service_pb2.Release(task=op.client, reason="not_held")
            self._post(claim_service_pb2.ConnectRequest(release=release))
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
            id=client.id,
            task=client.id,
            lease=client.lease,
            kind="lora",
            name=name,
            sha256=sha256,
            size=size,
            meta=meta,
        )
        return self._stub.RegisterTaskArtifact(request, metadata=self._md(client.org), timeout=120)

    def _read_client_input(self, client: ClientRunner, sha256: str) -> artifact_pb2.Artifact:
        request = claim_service_pb2.ReadTaskInputRequest(
            id=client.id, task=client.id, lease=client.lease, sha256=sha256
        )
        return self._stub.ReadTaskInput(request, metadata=self._md(client.org), timeout=60)
