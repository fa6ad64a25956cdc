from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from services.core import auth
from services.core.store import open_store
from tests.support import StackProcess, bearer


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """One stack for the session, started as the README says."""
    running = StackProcess(tmp_path_factory.mktemp("stack") / "home").start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def member_key(stack: StackProcess) -> str:
    return stack.create_key("acme", "member")


@pytest.fixture
def api(stack: StackProcess) -> Iterator[httpx.Client]:
    """A REST client acting in an org of its own, so tests never share a queue."""
    store = open_store(f"sqlite:///{stack.home / 'trainyard.db'}", run_migrations=False)
    with store.unit() as session:
        _, key = auth.create_key(session, org=f"org-{secrets.token_hex(4)}", role="member")
    store.dispose()
    with httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60) as client:
        yield client
