from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest

from bench.stack import postgres_schema
from tests.conftest import PG_URL, database_params
from tests.support import StackProcess


@pytest.fixture(scope="session")
def session_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """One stack for the session, started as the README says."""
    running = StackProcess(tmp_path_factory.mktemp("stack") / "home").start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def stack(session_stack: StackProcess) -> StackProcess:
    """The session's stack, unless a module has a `stack` of its own."""
    return session_stack


@pytest.fixture(autouse=True)
def _stack_environment_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test leaves the environment of the stack it used as it found it: the next test's
    CLI calls would otherwise run with whatever key it left there."""
    if "stack" not in request.fixturenames:
        yield
        return
    used: StackProcess = request.getfixturevalue("stack")
    before = dict(used.env)
    yield
    assert used.env == before, "the test changed its stack's environment"


@pytest.fixture(scope="session")
def member_key(stack: StackProcess) -> str:
    return stack.create_key("acme", "member")


@pytest.fixture
def api(stack: StackProcess) -> Iterator[httpx.Client]:
    """A REST client acting in an org of its own, so tests never share a queue."""
    with stack.member_client() as client:
        yield client


@pytest.fixture(scope="session", params=database_params())
def each_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackProcess]:
    """The README's stack on SQLite (the session's own) and again on a PostgreSQL schema
    of its own, for the tests that must hold on both stores."""
    if request.param == "sqlite":
        yield request.getfixturevalue("session_stack")
        return
    with contextlib.ExitStack() as scope:
        url = scope.enter_context(postgres_schema(PG_URL))
        home = tmp_path_factory.mktemp(f"stack-{request.param}") / "home"
        running = StackProcess(home, env={"TRAINYARD_DATABASE_URL": url}).start()
        scope.callback(running.stop)
        yield running
