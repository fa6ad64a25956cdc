"""Shared fixtures: a store on every database under test, temporary homes."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from services.core.store import Store, create_engine, normalise_url, open_store

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
    schema = f"ty_{secrets.token_hex(6)}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    base = normalise_url(PG_URL)
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = open_store(database_url)
    try:
        yield opened
    finally:
        opened.dispose()
