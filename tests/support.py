"""Helpers for tests that drive a real stack as a user would."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
import httpx
from google.protobuf.descriptor import ServiceDescriptor

import trainyard
from infra.stack import _envoy_binary
from trainyard.ports import free_port

BIN = Path(sys.executable).parent
T = TypeVar("T")

# The create body ARCHITECTURE.md shows, word for word.
EXAMPLE = {
    "idempotency_key": "nightly-42", "project": "support-bot", "requested_by": "ci",
    "base_model": "fixture-tiny-llm", "revision": "v1",
    "dataset": {"uri": "fixture:synthetic-tiny-v1", "system_prompt": "Be brief."},
    "objective": {"loss": "cross_entropy", "loss_mask": "assistant_only"},
    "adaptation": {"mode": "lora", "rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]},
    "hyperparameters": {"num_train_epochs": 3, "learning_rate": 0.0002, "per_device_train_batch_size": 4,
                        "gradient_accumulation_steps": 2, "warmup_steps": 0, "max_seq_length": 512,
                        "early_stopping_patience": 2},
    "resources": {"machines": ["gpu-1"], "devices": ["cuda"], "max_seconds": 3600},
    "output": {"kind": "lora", "name": "support-v1"},
    "retention": {"policy_class": "standard", "ttl_seconds": 604800},
}  # fmt: skip


class StackProcess:
    """`trainyard up` in a subprocess on a temporary home, as the README starts it."""

    def __init__(self, home: Path, *, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.port = free_port()
        self.env = {
            **os.environ,
            "TRAINYARD_HOME": str(home),
            "TRAINYARD_GATEWAY_PORT": str(self.port),
            # The Hub is never reached from a test: `hf://` datasets read the cache a test
            # builds here (`hf_cache`), as a deployment without internet would.
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(home.parent / f"{home.name}-hf-cache"),
            # Webhooks reach the receivers tests run on loopback (nothing else is allowed),
            # retry within a second, and the scans for stalled jobs and expiring outputs
            # run every second.
            "TRAINYARD_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
            "TRAINYARD_WEBHOOK_RETRY_SCHEDULE": "0,0.5",
            "TRAINYARD_WEBHOOK_RETRY_WINDOW_SECONDS": "120",
            "TRAINYARD_WEBHOOK_POLL_SECONDS": "1",
            "TRAINYARD_WEBHOOK_SCAN_SECONDS": "1",
            **(env or {}),
        }
        self.log_path = home.parent / f"{home.name}-stack.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def hf_cache(self) -> Path:
        """The Hugging Face Hub cache the stack's `hf://` datasets are read from."""
        return Path(self.env["HF_HUB_CACHE"])

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> StackProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (held by the child for its life)
        self.proc = subprocess.Popen(
            [str(BIN / "trainyard"), "up"], env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"trainyard up exited {self.proc.returncode}:\n{self.log_tail()}"
                )
            if (
                self.home / "run" / "stack.json"
            ).exists() and b"ready;" in self.log_path.read_bytes():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"trainyard up not ready in {timeout}s:\n{self.log_tail()}")

    def info(self) -> dict:  # type: ignore[type-arg]
        return json.loads((self.home / "run" / "stack.json").read_text())

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def cli(
        self, *args: str, check: bool = True, key: str = ""
    ) -> subprocess.CompletedProcess[str]:
        extra = {"TRAINYARD_API_KEY": key} if key else {}
        return subprocess.run(
            [str(BIN / "trainyard"), *args],
            env={**self.env, "TRAINYARD_URL": self.url, **extra},
            capture_output=True,
            text=True,
            check=check,
            timeout=600,
        )

    def create_key(self, org: str, role: str = "member") -> str:
        """A key made in the stack's store as `trainyard admin create-key` makes it, without
        a process of its own for each (the README's snippets run the command itself)."""
        from services.core import auth
        from services.core.store import open_store

        store = open_store(self.database_url, run_migrations=False)
        try:
            with store.unit() as session:
                return auth.create_key(session, org=org, role=role)[1]
        finally:
            store.dispose()

    def object_key(self, org: str, sha256: str) -> bytes:
        """The SSE-C key the stack's store holds an org's object under, found as
        ArtifactService finds it: for tests that plant bytes in the store."""
        from services.artifacts.crypto import KeyWrap, OrgKeys
        from services.core import keys
        from services.core.store import open_store, utcnow

        master = keys.master_key(self.home / "master.key", self.env.get("TRAINYARD_MASTER_KEY", ""))
        store = open_store(self.database_url, run_migrations=False)
        try:
            with store.unit(write=False) as session:
                return OrgKeys(KeyWrap(master), utcnow).object_key(session, org, sha256)
        finally:
            store.dispose()

    @property
    def database_url(self) -> str:
        return self.env.get("TRAINYARD_DATABASE_URL") or f"sqlite:///{self.home / 'trainyard.db'}"

    def member_client(self) -> httpx.Client:
        """A REST client acting in an org of its own, so tests never share a queue."""
        key = self.create_key(f"org-{secrets.token_hex(4)}")
        return httpx.Client(base_url=self.url, headers=bearer(key), timeout=60)

    def admin_key(self) -> str:
        return (self.home / "admin.key").read_text().strip()

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.target)


def service_descriptors() -> list[ServiceDescriptor]:
    """Every service of every generated `trainyard/*/v1/*_service_pb2.py` module, so a
    test that walks them walks a new service or method too."""
    root = Path(trainyard.__file__).parent
    found: list[ServiceDescriptor] = []
    for path in sorted(root.glob("*/v1/*_service_pb2.py")):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        found.extend(importlib.import_module(name).DESCRIPTOR.services_by_name.values())
    return found


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie awaiting its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@contextlib.contextmanager
def org_executor(
    stack: StackProcess,
    key: str,
    machine: str,
    log: Path,
    *args: str,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """An executor started as an org's user starts one, `trainyard executor --machine
    MACHINE ARGS` under an `executor` key, its log in `log`; stopped when the block ends
    (SIGTERM, SIGKILL past 60 s)."""
    environ = {
        **stack.env,
        "TRAINYARD_URL": stack.url,
        "TRAINYARD_API_KEY": key,
        "TRAINYARD_LOG_FORMAT": "text",
        **(env or {}),
    }
    argv = [str(BIN / "trainyard"), "executor", "--machine", machine, *args]
    with log.open("w") as err:
        process = subprocess.Popen(argv, env=environ, stdout=subprocess.DEVNULL, stderr=err)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


class ServiceThread:
    """A service built by its `build_server`, served by an event loop on a thread of the
    test process, on port 0; stopped by `stop()`."""

    def __init__(self, build: Callable[[], Any]) -> None:
        import asyncio
        import threading

        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.service: Any = None

        async def main() -> None:
            try:
                self.service = build()
                await self.service.start()
            except BaseException as exc:
                self._failure = exc
            finally:
                self._ready.set()

        self._thread = threading.Thread(target=self._run, args=(main,), daemon=True)
        self._thread.start()
        self._ready.wait(60)
        if self._failure:
            raise self._failure

    def _run(self, main: Callable[[], Any]) -> None:
        self._loop.run_until_complete(main())
        self._loop.run_forever()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.service.port}"

    def stop(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self.service.stop(grace=5), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def downloaded(artifacts: Any, url: str) -> bytes:
    """The bytes behind a download URL, asked of ArtifactService's stub with the URL's
    token and no key, as the gateway's download route asks it (for tests without one)."""
    from trainyard.artifact.v1 import artifact_service_pb2

    request = artifact_service_pb2.DownloadArtifactRequest(token=url.rsplit("/", 1)[-1])
    return b"".join(part.data for part in artifacts.DownloadArtifact(request, timeout=120))


def reason(response: Any) -> str:
    """The reason of a REST refusal: an RFC 9457 problem document's `code`, checked for its
    shape and its status."""
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == response.status_code
    assert problem["type"].startswith("https://trainyard.dev/problems/")
    assert problem["title"] and problem["detail"]
    return str(problem["code"])


def make_local_model(directory: Path) -> Path:
    """A tiny Hugging Face causal LM saved as a user would have one on disk: a byte-level
    BPE tokenizer trained in code and a seeded two-layer Llama."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from trainyard.training.datasets import fixture_rows

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [content for row in fixture_rows() for _, content in row.messages]
    tok.train_from_iterator([*corpus, "<|user|>\n", "<|assistant|>\n", "<|system|>\n"], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.save_pretrained(str(directory))
    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=512, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(str(directory), safe_serialization=True)
    return directory


def wait_for_job(
    client: Any, job_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 300
) -> dict[str, Any]:
    """Read a job over REST until `done(job)` holds; fail with the status it is stuck in."""
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = client.get(f"/v1/train/jobs/{job_id}").json()
        if done(job):
            return job
        time.sleep(0.25)
    raise AssertionError(f"job stuck in {job.get('status')}")


def eventually(
    read: Callable[[], T], holds: Callable[[T], bool], what: str, timeout: float = 60
) -> T:
    """Read until `holds(value)`, for a condition the stack reaches on its own (a part
    restarted, an executor connected); fail with the last value read."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if holds(got):
            return got
        assert time.monotonic() < deadline, f"{what}: still {got!r}"
        time.sleep(0.1)


def assert_envoy_accepts(config: str, tmp_path: Path) -> None:
    """Envoy itself validates a rendered config (`--mode validate`)."""
    path = tmp_path / "envoy.yaml"
    path.write_text(config)
    result = subprocess.run(
        [_envoy_binary(), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


class Receiver:
    """A webhook receiver a test runs on 127.0.0.1 (port 0, in a thread of the test): it
    keeps each POST (its headers, lower-cased, and its body) and answers the statuses
    `answers` lists, one a request, then 200. Stopped when the `with` block ends."""

    def __init__(self, answers: Sequence[int] = ()) -> None:
        import http.server
        import threading

        self.received: list[tuple[dict[str, str], bytes]] = []
        self._answers = list(answers)
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with outer._lock:
                    outer.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = outer._answers.pop(0) if outer._answers else 200
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(body) for _, body in self.received]

    def wait_for(
        self, holds: Callable[[list[tuple[dict[str, str], bytes]]], bool], timeout: float = 30
    ) -> list[tuple[dict[str, str], bytes]]:
        """The requests received once `holds(them)`; fails with what came by the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                got = list(self.received)
            if holds(got):
                return got
            assert time.monotonic() < deadline, f"the receiver got {len(got)} requests"
            time.sleep(0.05)
