"""One frozen configuration object per process, read from `TRAINYARD_*` variables.

Only `main` functions call `Config.from_env`; everything else receives the object.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from services.core import keys
from trainyard.training import model_files

# The most processes of one service a stack runs: it runs them all on one machine.
MAX_REPLICAS = 16
# Standard Webhooks' retry schedule: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, ...
WEBHOOK_RETRY_SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0)


class ConfigError(ValueError):
    """A setting the system cannot run with; the message names it and says why."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a Trainyard process reads from its environment."""

    home: Path
    database_url: str
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8080
    # The address other processes reach the gateway at (services call each other through it).
    gateway_url: str = "http://127.0.0.1:8080"
    # The gateway's address as clients reach it, which download URLs name; empty:
    # `gateway_url`.
    public_gateway_url: str = ""
    bind_host: str = "127.0.0.1"
    # 0 binds an ephemeral port; the process writes the one it got under `home/run/`.
    service_ports: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # The loopback port this process serves Prometheus metrics on; None serves none.
    metrics_port: int | None = None
    lease_ttl_seconds: int = 600
    report_interval_seconds: int = 20
    queue_limit: int = 64
    # The most log and metric events a job keeps (HIP-1333 §12); tests set it lower.
    max_job_events: int = 100_000
    execution_limit_seconds: int = 21_600
    retention_days: int = 30
    # How long an upload grant's URLs work (two hours, HIP-1333 §9).
    grant_seconds: int = 7200
    # Seconds between retention sweeps (hourly); tests set it lower.
    sweep_interval_seconds: int = 3600
    # How long the gateway keeps a request with nothing moving open (a long poll, a
    # stalled upload); the executors' stream is exempt and kept alive by HTTP/2 pings.
    gateway_idle_timeout_seconds: int = 300
    s3_endpoint: str = ""
    # The S3 address presigned URLs name, for clients that reach the store another way.
    s3_public_endpoint: str = ""
    s3_region: str = "us-east-1"
    s3_bucket: str = "trainyard"
    s3_access_key: str = ""
    s3_secret_key: str = ""
    # A key of the platform role the services use to call each other.
    service_key: str = ""
    # The master key in hex; empty reads (or first generates) `home/master.key`.
    master_key_hex: str = ""
    # Whether `trainyard up` runs a local executor (as the platform's, for jobs naming no machine).
    local_executor: bool = True
    # Set by TRAINYARD_MODELS_DIR; `models_dir` falls back to `home/models`.
    models_path: Path | None = None
    log_format: str = "auto"
    log_level: str = "INFO"
    # What a new org's wallet starts with, in US cents, so a first job runs.
    free_credit_cents: int = 1000
    # A held window's device-seconds per device (HIP-1333 §10: 300); a task asks for the
    # next below 3/5 of it left and stops below 2/15 (180 s and 40 s of 300).
    window_seconds: int = 300
    # The credit authorization's margin over the expected price (`002_…` estimate).
    authorization_margin_percent: int = 25
    # Live training clients an org may hold, and an engine executor across every org
    # (HIP-1333 §7's TRAIN_CLIENTS and TRAIN_ENGINE_CLIENTS).
    train_clients: int = 2
    train_engine_clients: int = 2
    # An org's members and admins create their own training clients: each runs in an
    # engine process of its own, the isolation HIP-1333 §7 waits for, within
    # `train_clients`. `TRAINYARD_TRAIN_CLIENTS_BY_MEMBERS=0` keeps it the operator's.
    train_clients_by_members: bool = True
    # Per API key, at the gateway (per Envoy process): requests a second, sustained and in a
    # burst; the largest request body. Past them: 429 `RATE_LIMITED`, 413 `PAYLOAD_TOO_LARGE`.
    rate_per_key: int = 300
    rate_burst_per_key: int = 600
    max_body_bytes: int = 8 * 1024 * 1024
    # Per API key, per service process: calls that wait open at once (watches, long polls,
    # streams); past it, 429 `RATE_LIMITED`. The platform's own key is not capped.
    streams_per_key: int = 64
    # Processes `trainyard up` runs of each service, behind Envoy. More than one needs
    # PostgreSQL: replicas share the database, and SQLite is one machine's single-writer
    # file.
    replicas: int = 1
    # The gateway's TLS (infra/tls.py): a certificate and key the operator names, or a
    # self-signed pair made in the home on request; none: plain HTTP, the local default.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_self_signed: bool = False
    # The CAs clients verify the operator's certificate with, when not the system's.
    tls_ca_file: Path | None = None
    # The CAs whose client certificates executors must show besides their key (mutual TLS).
    tls_client_ca_file: Path | None = None
    # The process name a replica's run files and log lines carry (`jobs`, `jobs-2`, ...),
    # set by `trainyard up`; empty: the service's own name.
    replica_name: str = ""
    # Webhooks: the networks deliveries may reach besides public addresses (CIDRs; none
    # by default, so no loopback, private or link-local address is ever sent to); the
    # seconds between a delivery's attempts (the Standard Webhooks schedule, its last gap
    # repeated) within the window after the first, then it has failed; one attempt's
    # limit; how often the worker looks for due deliveries when no wake-up came, and how
    # often it scans for stalled jobs and expiring outputs.
    webhook_allowed_networks: tuple[str, ...] = ()
    webhook_retry_schedule: tuple[float, ...] = WEBHOOK_RETRY_SCHEDULE
    webhook_retry_window_seconds: float = 86_400.0
    webhook_timeout_seconds: float = 12.0
    webhook_poll_seconds: float = 5.0
    webhook_scan_seconds: float = 60.0

    @property
    def models_dir(self) -> Path:
        """Where local Hugging Face bases are found (one directory each)."""
        return self.models_path or self.home / "models"

    @property
    def public_url(self) -> str:
        """Where clients reach the gateway: download URLs start with it."""
        return self.public_gateway_url or self.gateway_url

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def master_key_path(self) -> Path:
        return self.home / "master.key"

    def master_key(self) -> bytes:
        return keys.master_key(self.master_key_path, self.master_key_hex)

    @property
    def report_seconds(self) -> int:
        """The most seconds an executor lets pass between its reports: the configured
        interval, and at most a third of the lease TTL, so a task outlives two missed
        heartbeats (HIP-1333 §5 answers it as the task's `report`)."""
        return min(self.report_interval_seconds, self.lease_ttl_seconds // 3)

    def check(self) -> None:
        """Refuse a configuration the system cannot keep its promises under."""
        if self.report_interval_seconds < 1:
            raise ConfigError("TRAINYARD_REPORT_INTERVAL_SECONDS must be at least 1.")
        if self.report_seconds < 1:
            raise ConfigError(
                "TRAINYARD_LEASE_TTL_SECONDS must be at least 3: executors report at most "
                "once a second, and a lease must outlive three report intervals."
            )
        if self.window_seconds < 15:
            raise ConfigError("TRAINYARD_WINDOW_SECONDS must be at least 15.")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError("TRAINYARD_METRICS_PORT must be a port number (0 picks one).")
        if self.free_credit_cents < 0:
            raise ConfigError("TRAINYARD_FREE_CREDIT_CENTS must not be negative.")
        if min(self.rate_per_key, self.streams_per_key, self.max_body_bytes) < 1:
            raise ConfigError(
                "TRAINYARD_RATE_PER_KEY, TRAINYARD_STREAMS_PER_KEY and TRAINYARD_MAX_BODY_BYTES "
                "must be at least 1."
            )
        if self.rate_burst_per_key < self.rate_per_key:
            raise ConfigError(
                "TRAINYARD_RATE_BURST_PER_KEY must be at least TRAINYARD_RATE_PER_KEY."
            )
        if not 1 <= self.replicas <= MAX_REPLICAS:
            raise ConfigError(f"TRAINYARD_REPLICAS must be from 1 to {MAX_REPLICAS}.")
        for network in self.webhook_allowed_networks:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ConfigError(
                    "TRAINYARD_WEBHOOK_ALLOWED_NETWORKS must be comma-separated CIDRs "
                    "(127.0.0.1/32, 10.0.0.0/8, ::1/128)."
                ) from None
        if not self.webhook_retry_schedule or min(self.webhook_retry_schedule) < 0:
            raise ConfigError(
                "TRAINYARD_WEBHOOK_RETRY_SCHEDULE must be comma-separated seconds, none negative."
            )
        if not 1 <= self.webhook_timeout_seconds <= 30:
            raise ConfigError("TRAINYARD_WEBHOOK_TIMEOUT_SECONDS must be from 1 to 30.")
        if min(self.webhook_poll_seconds, self.webhook_scan_seconds) <= 0:
            raise ConfigError(
                "TRAINYARD_WEBHOOK_POLL_SECONDS and TRAINYARD_WEBHOOK_SCAN_SECONDS must be above 0."
            )
        if self.webhook_retry_window_seconds <= 0:
            raise ConfigError("TRAINYARD_WEBHOOK_RETRY_WINDOW_SECONDS must be above 0.")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("TRAINYARD_TLS_CERT and TRAINYARD_TLS_KEY go together.")
        if self.tls_self_signed and self.tls_cert_file:
            raise ConfigError(
                "TRAINYARD_TLS_SELF_SIGNED makes the gateway's pair: name no TRAINYARD_TLS_CERT."
            )
        if self.tls_client_ca_file and not self.tls:
            raise ConfigError(
                "TRAINYARD_TLS_CLIENT_CA needs TLS: TRAINYARD_TLS_CERT and TRAINYARD_TLS_KEY, "
                "or TRAINYARD_TLS_SELF_SIGNED=1."
            )
        for name, path in [
            ("TRAINYARD_TLS_CERT", self.tls_cert_file),
            ("TRAINYARD_TLS_KEY", self.tls_key_file),
            ("TRAINYARD_TLS_CA", self.tls_ca_file),
            ("TRAINYARD_TLS_CLIENT_CA", self.tls_client_ca_file),
        ]:
            if path is not None and not path.is_file():
                raise ConfigError(f"{name} names no readable file.")
        if self.replicas > 1 and self.database_url.startswith("sqlite"):
            raise ConfigError(
                "TRAINYARD_REPLICAS above 1 needs TRAINYARD_DATABASE_URL on PostgreSQL: "
                "replicas share the database, and SQLite is one machine's single-writer file."
            )

    @property
    def tls(self) -> bool:
        """Whether the gateway serves TLS."""
        return bool(self.tls_cert_file) or self.tls_self_signed

    def port_for(self, service: str) -> int:
        return int(self.service_ports.get(service, 0))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env

        def num(name: str, default: int) -> int:
            raw = env.get(f"TRAINYARD_{name}", "")
            return int(raw) if raw.strip() else default

        def seconds(name: str, default: float) -> float:
            raw = env.get(f"TRAINYARD_{name}", "")
            try:
                return float(raw) if raw.strip() else default
            except ValueError:
                raise ConfigError(f"TRAINYARD_{name} must be a number of seconds.") from None

        def listed(name: str) -> tuple[str, ...]:
            return tuple(
                p.strip() for p in env.get(f"TRAINYARD_{name}", "").split(",") if p.strip()
            )

        try:
            schedule = tuple(float(p) for p in listed("WEBHOOK_RETRY_SCHEDULE"))
        except ValueError:
            raise ConfigError(
                "TRAINYARD_WEBHOOK_RETRY_SCHEDULE must be comma-separated seconds."
            ) from None

        def path(name: str) -> Path | None:
            raw = env.get(f"TRAINYARD_{name}", "").strip()
            return Path(raw).expanduser().resolve() if raw else None

        home = Path(env.get("TRAINYARD_HOME") or "./.trainyard").resolve()
        gateway_port = num("GATEWAY_PORT", 8080)
        gateway_host = env.get("TRAINYARD_GATEWAY_HOST") or "127.0.0.1"
        metrics_port = env.get("TRAINYARD_METRICS_PORT", "").strip()
        config = cls(
            home=home,
            database_url=env.get("TRAINYARD_DATABASE_URL") or f"sqlite:///{home / 'trainyard.db'}",
            gateway_host=gateway_host,
            gateway_port=gateway_port,
            gateway_url=env.get("TRAINYARD_GATEWAY_URL") or f"http://{gateway_host}:{gateway_port}",
            public_gateway_url=env.get("TRAINYARD_PUBLIC_URL", ""),
            bind_host=env.get("TRAINYARD_BIND_HOST") or "127.0.0.1",
            service_ports={
                name: num(f"{name.upper()}_PORT", 0)
                for name in ("jobs", "claims", "artifacts", "meter", "tinker")
            },
            metrics_port=int(metrics_port) if metrics_port else None,
            lease_ttl_seconds=num("LEASE_TTL_SECONDS", 600),
            report_interval_seconds=num("REPORT_INTERVAL_SECONDS", 20),
            queue_limit=num("QUEUE_LIMIT", 64),
            max_job_events=num("MAX_JOB_EVENTS", 100_000),
            execution_limit_seconds=num("EXECUTION_LIMIT_SECONDS", 21_600),
            # HIP-1333 calls it TRAIN_RETENTION_DAYS; both names are read.
            retention_days=num("RETENTION_DAYS", int(env.get("TRAIN_RETENTION_DAYS") or 30)),
            grant_seconds=num("GRANT_SECONDS", 7200),
            sweep_interval_seconds=num("SWEEP_INTERVAL_SECONDS", 3600),
            gateway_idle_timeout_seconds=num("GATEWAY_IDLE_TIMEOUT_SECONDS", 300),
            s3_endpoint=env.get("TRAINYARD_S3_ENDPOINT", ""),
            s3_public_endpoint=env.get("TRAINYARD_S3_PUBLIC_ENDPOINT", ""),
            s3_region=env.get("TRAINYARD_S3_REGION") or "us-east-1",
            s3_bucket=env.get("TRAINYARD_S3_BUCKET") or "trainyard",
            s3_access_key=env.get("TRAINYARD_S3_ACCESS_KEY", ""),
            s3_secret_key=env.get("TRAINYARD_S3_SECRET_KEY", ""),
            service_key=env.get("TRAINYARD_SERVICE_KEY", ""),
            master_key_hex=env.get("TRAINYARD_MASTER_KEY", ""),
            local_executor=env.get("TRAINYARD_LOCAL_EXECUTOR", "1") not in ("0", "false", "no"),
            models_path=model_files.models_dir(env),
            log_format=env.get("TRAINYARD_LOG_FORMAT") or "auto",
            log_level=env.get("TRAINYARD_LOG_LEVEL") or "INFO",
            free_credit_cents=num("FREE_CREDIT_CENTS", 1000),
            window_seconds=num("WINDOW_SECONDS", 300),
            train_clients=num("TRAIN_CLIENTS", 2),
            train_clients_by_members=env.get("TRAINYARD_TRAIN_CLIENTS_BY_MEMBERS", "1").strip()
            not in ("0", "false", "no"),
            train_engine_clients=num("TRAIN_ENGINE_CLIENTS", 2),
            authorization_margin_percent=num("AUTHORIZATION_MARGIN_PERCENT", 25),
            rate_per_key=num("RATE_PER_KEY", 300),
            rate_burst_per_key=num("RATE_BURST_PER_KEY", 600),
            max_body_bytes=num("MAX_BODY_BYTES", 8 * 1024 * 1024),
            streams_per_key=num("STREAMS_PER_KEY", 64),
            replicas=num("REPLICAS", 1),
            replica_name=env.get("TRAINYARD_REPLICA_NAME", ""),
            tls_cert_file=path("TLS_CERT"),
            tls_key_file=path("TLS_KEY"),
            tls_self_signed=env.get("TRAINYARD_TLS_SELF_SIGNED", "0")
            not in ("0", "false", "no", ""),
            tls_ca_file=path("TLS_CA"),
            tls_client_ca_file=path("TLS_CLIENT_CA"),
            webhook_allowed_networks=listed("WEBHOOK_ALLOWED_NETWORKS"),
            webhook_retry_schedule=schedule or WEBHOOK_RETRY_SCHEDULE,
            webhook_retry_window_seconds=seconds("WEBHOOK_RETRY_WINDOW_SECONDS", 86_400.0),
            webhook_timeout_seconds=seconds("WEBHOOK_TIMEOUT_SECONDS", 12.0),
            webhook_poll_seconds=seconds("WEBHOOK_POLL_SECONDS", 5.0),
            webhook_scan_seconds=seconds("WEBHOOK_SCAN_SECONDS", 60.0),
        )
        config.check()
        return config
