"""A whole stack on a temporary home for one benchmark run, stopped when it ends; on
SQLite by default, or on a PostgreSQL schema of its own, dropped after."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

from infra.stack import Endpoints, Stack, ensure_key
from services.core.config import Config
from services.core.store import create_engine, normalise_url

# Where the benchmarks also measure PostgreSQL: the server the tests use, when named.
POSTGRES_URL = os.environ.get("TRAINYARD_TEST_DATABASE_URL", "")


def databases() -> list[str]:
    """The databases to measure: SQLite, and PostgreSQL when one is named."""
    return ["sqlite", "postgresql"] if POSTGRES_URL else ["sqlite"]


@contextlib.contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """The URL of a fresh schema on the PostgreSQL server at `url`, dropped after (the
    tests' databases too)."""
    schema = f"ty_{secrets.token_hex(6)}"
    admin = create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    base = normalise_url(url)
    try:
        yield f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def running(
    database: str = "sqlite", **env: str
) -> Iterator[tuple[Endpoints, dict[str, str], Config]]:
    """The stack's endpoints, keys by role (`member`, `executor`, `platform`) of the org
    `bench`, and its configuration."""
    with contextlib.ExitStack() as stack_of:
        home = stack_of.enter_context(tempfile.TemporaryDirectory())
        if database == "postgresql":
            env = {
                **env,
                "TRAINYARD_DATABASE_URL": stack_of.enter_context(postgres_schema(POSTGRES_URL)),
            }
        env = {
            "TRAINYARD_HOME": home,
            "TRAINYARD_GATEWAY_PORT": "0",
            # One key loads the gateway as many would: the per-key bucket is not the figure.
            "TRAINYARD_RATE_PER_KEY": "1000000",
            "TRAINYARD_RATE_BURST_PER_KEY": "1000000",
            **env,
        }
        config = Config.from_env(env)
        # The services read their configuration from the environment the stack hands on.
        stack_of.enter_context(_environ(env))
        log = stack_of.enter_context(open(Path(home) / "stack.log", "w"))
        stack = Stack(config, output=log)
        stack_of.callback(stack.stop)
        endpoints = stack.start()
        keys = {
            role: ensure_key(
                config, config.home / f"{role}.key", org="bench", role=role, label="bench"
            )
            for role in ("member", "executor", "platform")
        }
        yield endpoints, keys, config
