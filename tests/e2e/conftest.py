from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support import StackProcess


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
    with stack.member_client() as client:
        yield client
