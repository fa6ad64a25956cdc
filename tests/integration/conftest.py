from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

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
