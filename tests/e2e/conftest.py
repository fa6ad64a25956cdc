from __future__ import annotations

from collections.abc import Iterator

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
