"""Shared fixtures: a store on every database under test, temporary homes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from bench.stack import postgres_schema
from services.core.store import Store, open_store

PG_URL = os.environ.get("TRAINYARD_TEST_DATABASE_URL", "")


def database_params() -> list[object]:
    params: list[object] = [pytest.param("sqlite", id="sqlite")]
    params.append(
        pytest.param(
            "postgresql",
            id="postgresql",
            marks=pytest.mark.skipif(not PG_URL, reason="TRAINYARD_TEST_DATABASE_URL is not set"),
        )
    )
    return params


@pytest.fixture(params=database_params())
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A fresh, empty database: a SQLite file, or a schema of its own on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'trainyard.db'}"
        return
    with postgres_schema(PG_URL) as url:
        yield url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = open_store(database_url)
    try:
        yield opened
    finally:
        opened.dispose()
