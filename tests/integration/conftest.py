from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import grpc
import pytest

from infra.objectstore import SeaweedFS
from infra.procs import Output
from services.artifacts.server import build_server as build_artifacts
from services.claims.server import build_server as build_claims
from services.core import auth
from services.core.config import Config
from services.core.store import Store
from services.jobs.server import build_server
from tests.support import ServiceThread


@pytest.fixture
def config(tmp_path, database_url: str) -> Config:  # type: ignore[no-untyped-def]
    return Config.from_env(
        {"TRAINYARD_HOME": str(tmp_path / "home"), "TRAINYARD_DATABASE_URL": database_url}
    )


@pytest.fixture
def jobs(config: Config, store: Store) -> Iterator[ServiceThread]:
    served = ServiceThread(lambda: build_server(config, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def keys(store: Store) -> dict[str, str]:
    made = {}
    with store.unit() as session:
        for name, org, role in [("acme", "acme", "member"), ("globex", "globex", "member")]:
            made[name] = auth.create_key(session, org=org, role=role)[1]
    return made


@pytest.fixture
def channel(jobs: ServiceThread) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(jobs.target) as opened:
        yield opened


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One real SeaweedFS for the session; tests keep apart by org."""
    home = tmp_path_factory.mktemp("seaweed")
    log = open(home / "weed.log", "w")  # noqa: SIM115 (open for the store's life)
    store = SeaweedFS(home, Output(log))
    try:
        store.wait_ready("trainyard")
        yield store
    finally:
        store.stop()
        log.close()


@pytest.fixture
def s3_config(config: Config, seaweed: SeaweedFS) -> Config:
    return dataclasses.replace(
        config,
        s3_endpoint=seaweed.endpoint,
        s3_access_key=seaweed.access_key,
        s3_secret_key=seaweed.secret_key,
    )


@pytest.fixture
def platform_key(store: Store) -> str:
    with store.unit() as session:
        return auth.create_key(session, org="platform", role="platform")[1]


@pytest.fixture
def artifacts(s3_config: Config, store: Store) -> Iterator[ServiceThread]:
    served = ServiceThread(lambda: build_artifacts(s3_config, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def jobs_reading(
    s3_config: Config, store: Store, artifacts: ServiceThread, platform_key: str
) -> Iterator[ServiceThread]:
    """JobService reading uploads from the ArtifactService above, as the platform."""
    wired = dataclasses.replace(
        s3_config, gateway_url=f"http://{artifacts.target}", service_key=platform_key
    )
    served = ServiceThread(lambda: build_server(wired, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def claims_config(config: Config) -> Config:
    return dataclasses.replace(config, lease_ttl_seconds=3, report_interval_seconds=1)


@pytest.fixture
def claims(claims_config: Config, store: Store) -> Iterator[ServiceThread]:
    served = ServiceThread(lambda: build_claims(claims_config, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()
