"""The executor's holder of a training client, against a stand-in engine that speaks the
engine's JSON lines: it answers create, forwards each operation (a repeated one too),
stores a saved adapter under the client's lease, and gives the client back when its
engine dies. The services are fakes here."""

from __future__ import annotations

import hashlib
import json
import queue
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from executor.agent import agent as agent_module
from executor.agent.clients import ClientRunner
from executor.agent.config import AgentConfig
from services.core import errors
from tests.unit.test_runner import Refusal
from trainyard import packing
from trainyard.artifact.v1 import artifact_pb2
from trainyard.claim.v1 import claim_service_pb2
from trainyard.client.v1 import client_pb2

CLIENT = "cli_0123456789abcdef"
# Answers as the engine does; records each seq it reads, and dies on kind `die`.
FAKE_ENGINE = r"""
import json, pathlib, sys
spec = json.loads(pathlib.Path(sys.argv[1]).read_text())
work = pathlib.Path(spec["work_dir"])
if spec["base_model"] == "missing":
    print(json.dumps({"failed": "base_not_found"}), flush=True)
    sys.exit(1)
print("a line that is not an answer", flush=True)
print(json.dumps({"ready": True, "vocab_size": 259, "trainable": 8}), flush=True)
for line in sys.stdin:
    op = json.loads(line)
    with open(work / "seen.txt", "a") as seen:
        seen.write(f"{op['seq']}\n")
    if op["kind"] == "die":
        sys.exit(3)
    if op["kind"] == "save_weights":
        out = work / f"weights-{op['seq']}"
        out.mkdir(exist_ok=True)
        (out / "adapter_model.safetensors").write_bytes(b"weights")
        output = {"name": op["input"]["name"], "step": 2, "dir": str(out)}
    elif op["kind"] == "refuse":
        answer = {"seq": op["seq"], "ok": False, "code": "INVALID_REQUEST",
                  "field": "data", "message": "must hold 1 to 64 datums", "seconds": 0.0}
        print(json.dumps(answer), flush=True)
        continue
    else:
        output = {"echo": op["input"]}
    print(json.dumps({"seq": op["seq"], "ok": True, "output": output, "seconds": 0.5}), flush=True)
"""


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.sent: queue.Queue[claim_service_pb2.ConnectRequest] = queue.Queue()
        self.registered: list[tuple[str, str, int, dict[str, str]]] = []
        self.refuse: BaseException | None = None
        self.runners: list[ClientRunner] = []
        self.script = tmp_path / "fake_engine.py"
        self.script.write_text(FAKE_ENGINE)

    def register(
        self, runner: ClientRunner, name: str, sha256: str, size: int, meta: dict[str, str]
    ) -> artifact_pb2.Grant:
        assert (runner.id, runner.lease) == (CLIENT, "trl_lease")
        if self.refuse is not None:
            raise self.refuse
        self.registered.append((name, sha256, size, meta))
        return artifact_pb2.Grant(stored=True)  # the org holds the bytes: nothing to PUT

    def start(
        self,
        base: str = "fixture-tiny-llm",
        origin: dict[str, Any] | None = None,
        read: Any = None,
    ) -> ClientRunner:
        given = {"base_model": base, "adaptation": {"rank": 4}, "seed": 1, **(origin or {})}
        create = claim_service_pb2.ClientOperation(
            client=CLIENT, seq=0, kind="create", lease="trl_lease", org="acme", report=10,
            input=json.dumps(given),
        )  # fmt: skip
        runner = ClientRunner(
            create, self.tmp_path / "work", self.sent.put, self.register,
            engine=(sys.executable, str(self.script)), read=read,
        )  # fmt: skip
        self.runners.append(runner)
        runner.start()
        return runner

    def next(self) -> claim_service_pb2.ConnectRequest:
        return self.sent.get(timeout=60)

    def result(self) -> claim_service_pb2.OperationResult:
        message = self.next()
        assert message.WhichOneof("kind") == "result", message
        return message.result

    def seen(self, runner: ClientRunner) -> list[int]:
        return [int(s) for s in (runner.work / "seen.txt").read_text().split()]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    for runner in made.runners:
        runner.close()
        assert runner.ended.wait(30)


def test_create_is_answered_once_the_engine_is_ready_and_again_when_repeated(
    harness: Harness,
) -> None:
    runner = harness.start()
    created = harness.result()
    assert (created.client, created.lease, created.seq, created.ok) == (
        CLIENT,
        "trl_lease",
        0,
        True,
    )
    assert created.output == ""
    spec = json.loads((runner.work / "engine.json").read_text())
    assert spec["base_model"] == "fixture-tiny-llm"
    assert spec["adaptation"] == {"rank": 4}
    assert spec["seed"] == 1
    assert spec["work_dir"] == str(runner.work)
    runner.submit(0, "create", "")
    assert harness.result() == created
    # Sent again on a new stream, the create carries a new lease, which the answer and
    # every later one carry.
    runner.submit(0, "create", "", "trl_new")
    again = harness.result()
    assert (again.seq, again.ok, again.lease) == (0, True, "trl_new") and runner.lease == "trl_new"


def test_each_operation_is_forwarded_in_order_and_a_repeated_seq_again(harness: Harness) -> None:
    runner = harness.start()
    harness.result()
    runner.submit(1, "forward_backward", json.dumps({"data": [1]}))
    runner.submit(2, "refuse", "{}")
    runner.submit(1, "forward_backward", json.dumps({"data": [1]}))
    first, refused, again = harness.result(), harness.result(), harness.result()
    assert (first.seq, first.ok, json.loads(first.output)) == (1, True, {"echo": {"data": [1]}})
    assert first.seconds == 0.5
    assert (refused.seq, refused.ok, refused.code, refused.field) == (
        2, False, "INVALID_REQUEST", "data",
    )  # fmt: skip
    assert again == first
    assert harness.seen(runner) == [1, 2, 1]


def test_a_saved_adapter_is_stored_as_a_lora_artifact_of_the_client(harness: Harness) -> None:
    runner = harness.start()
    harness.result()
    runner.submit(3, "save_weights", json.dumps({"name": "first"}))
    saved = harness.result()
    assert saved.ok, saved
    output = json.loads(saved.output)
    json_format.Parse(saved.output, client_pb2.SaveWeightsOutput())  # as the service reads it
    packed = packing.pack_bytes(runner.work / "weights-3")
    assert output == {
        "name": "first", "sha256": hashlib.sha256(packed).hexdigest(), "size": len(packed),
        "step": 2, "kind": "lora", "optimizer": False,
    }  # fmt: skip
    [(name, digest, size, meta)] = harness.registered
    assert (name, digest, size) == ("first", output["sha256"], len(packed))
    assert meta == {"client": CLIENT, "step": "2", "base": "fixture-tiny-llm"}
    # Sent again after a reconnect: answered the same, not stored twice.
    runner.submit(3, "save_weights", json.dumps({"name": "first"}))
    assert harness.result() == saved
    assert len(harness.registered) == 1
    assert not list(runner.work.glob("*.tar"))


def test_an_adapter_that_cannot_be_stored_answers_upload_failed(harness: Harness) -> None:
    harness.refuse = Refusal(errors.ValidationError("name", "bad"))
    runner = harness.start()
    harness.result()
    runner.submit(1, "save_weights", json.dumps({"name": "first"}))
    failed = harness.result()
    assert (failed.seq, failed.ok, failed.code) == (1, False, "ARTIFACT_UPLOAD_FAILED")


def test_a_base_that_does_not_load_fails_create(harness: Harness) -> None:
    runner = harness.start(base="missing")
    created = harness.result()
    assert (created.seq, created.ok, created.code) == (0, False, "ENGINE_FAILED")
    assert "missing" not in created.message
    assert runner.ended.wait(30)


def test_an_engine_that_dies_gives_the_client_back(harness: Harness) -> None:
    runner = harness.start()
    harness.result()
    runner.submit(1, "die", "{}")
    message = harness.next()
    assert message.WhichOneof("kind") == "release"
    assert (message.release.task, message.release.lease, message.release.reason) == (
        CLIENT, "trl_lease", "engine_failed",
    )  # fmt: skip
    assert runner.ended.wait(30)
    assert runner.closed


def test_close_kills_the_engine_and_sends_nothing_more(harness: Harness) -> None:
    runner = harness.start()
    harness.result()
    process = runner._process
    assert process is not None
    runner.close()
    assert runner.ended.wait(30)
    assert process.poll() is not None
    runner.submit(1, "forward_backward", "{}")
    assert harness.sent.empty()


def test_the_agent_routes_a_clients_operations_and_drops_it_when_told(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def runner(*args: Any, **kwargs: Any) -> ClientRunner:
        made = ClientRunner(*args, **kwargs, engine=(sys.executable, str(harness.script)))
        harness.runners.append(made)
        return made

    monkeypatch.setattr(agent_module, "ClientRunner", runner)
    config = AgentConfig(
        url="http://127.0.0.1:9", api_key="k", machine="m", clients=2,
        work_root=harness.tmp_path / "agent",
    )  # fmt: skip
    agent = agent_module.Agent(config)
    outbox: queue.Queue[claim_service_pb2.ConnectRequest | None] = queue.Queue()
    agent._outbox = outbox

    def result() -> claim_service_pb2.OperationResult:
        message = outbox.get(timeout=60)
        assert message is not None and message.WhichOneof("kind") == "result"
        return message.result

    def operation(seq: int, kind: str, body: str = "{}") -> claim_service_pb2.ConnectResponse:
        op = claim_service_pb2.ClientOperation(client=CLIENT, seq=seq, kind=kind, input=body)
        if kind == "create":
            op.lease, op.org, op.report = "trl_lease", "acme", 10
            op.input = json.dumps({"base_model": "fixture-tiny-llm"})
        return claim_service_pb2.ConnectResponse(operation=op)

    try:
        agent._dispatch(operation(0, "create"))
        assert (result().seq, CLIENT in agent.clients) == (0, True)
        assert agent.clients[CLIENT].work == harness.tmp_path / "agent" / "m" / CLIENT
        agent._dispatch(operation(1, "forward_backward", '{"data": []}'))
        assert result().seq == 1
        held = agent.clients[CLIENT]
        agent._dispatch(
            claim_service_pb2.ConnectResponse(ack=claim_service_pb2.Ack(task=CLIENT, seq=0))
        )
        assert CLIENT in agent.clients  # a heartbeat's acknowledgement keeps it
        lost = claim_service_pb2.Ack(task=CLIENT, reason="LEASE_LOST")
        agent._dispatch(claim_service_pb2.ConnectResponse(ack=lost))
        assert CLIENT not in agent.clients
        assert held.ended.wait(30) and held.closed

        agent._dispatch(operation(0, "create"))
        assert result().seq == 0
        cancel = claim_service_pb2.Cancel(task=CLIENT)
        agent._dispatch(claim_service_pb2.ConnectResponse(cancel=cancel))
        assert CLIENT not in agent.clients
        # A call for a client it no longer holds is disowned, not left unanswered.
        agent._dispatch(operation(2, "optim_step"))
        message = outbox.get(timeout=10)
        assert message is not None and message.WhichOneof("kind") == "release"
        assert (message.release.task, message.release.lease) == (CLIENT, "")
    finally:
        agent._channel.close()


def test_a_client_from_a_saved_state_starts_its_engine_on_the_unpacked_bytes(
    harness: Harness, tmp_path: Path
) -> None:
    import http.server
    import threading

    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "adapter_model.safetensors").write_bytes(b"weights")
    (saved / "optimizer.safetensors").write_bytes(b"moments")
    packed = packing.pack_bytes(saved)
    sha = hashlib.sha256(packed).hexdigest()

    class Serve(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Serve)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    asked: list[str] = []

    def read(runner: ClientRunner, sha256: str) -> artifact_pb2.Artifact:
        assert (runner.id, runner.lease) == (CLIENT, "trl_lease")
        asked.append(sha256)
        url = f"http://127.0.0.1:{server.server_address[1]}/object"
        return artifact_pb2.Artifact(sha256=sha256, url=url)

    try:
        runner = harness.start(origin={"from": sha, "with_optimizer": True}, read=read)
        assert harness.result().ok
        spec = json.loads((runner.work / "engine.json").read_text())
        assert asked == [sha] and spec["with_optimizer"] is True
        init = Path(spec["init_dir"])
        assert (init / "optimizer.safetensors").read_bytes() == b"moments"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_client_whose_origin_cannot_be_read_fails_its_create(harness: Harness) -> None:
    def read(runner: ClientRunner, sha256: str) -> artifact_pb2.Artifact:
        raise errors.NotFound()

    harness.start(origin={"from": "ab" * 32}, read=read)
    created = harness.result()
    assert (created.ok, created.code) == (False, "ENGINE_FAILED")
    assert created.message == "the adapter the client starts from could not be read"
    assert "ab" * 32 not in created.message
