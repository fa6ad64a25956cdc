"""Upgrades: a store made by any shipped revision migrates to the newest with every row it
held, on SQLite and PostgreSQL.

The store is built one revision at a time from the first; after each, a row goes into
every table the schema has then (the older tables again too), so each migration runs over
tables that hold rows of every earlier revision, as a deployment's do. A migration that
adds a required column without a default, rewrites a table and drops its rows, or breaks a
key fails here."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory

from services.core import auth
from services.core.store import _MIGRATIONS, alembic_config, create_engine, schema_revision

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def revisions() -> list[str]:
    """Every shipped revision, oldest first."""
    script = ScriptDirectory(str(_MIGRATIONS))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def _value(column: sa.Column[Any], n: int) -> Any:
    """A value of the column's type, unique for `n`, within its length."""
    kind = column.type
    if isinstance(kind, sa.Boolean):
        return False
    if isinstance(kind, sa.Integer):
        return n
    if isinstance(kind, sa.Float | sa.Numeric):
        return float(n)
    if isinstance(kind, sa.DateTime):
        return NOW
    if isinstance(kind, sa.JSON):
        return {}
    if isinstance(kind, sa.LargeBinary):
        return b"x"
    if isinstance(kind, sa.String):
        text = f"r{n:x}"
        return text[: kind.length] if kind.length else text
    raise AssertionError(f"no test value for {column.table.name}.{column.name}: {kind!r}")


def _fill(conn: sa.Connection, counter: Iterator[int]) -> dict[str, list[dict[str, Any]]]:
    """One row in every table, parents first, each foreign key naming a parent's row;
    returns each table's row keys."""
    meta = sa.MetaData()
    meta.reflect(conn)
    inserted: dict[str, dict[str, Any]] = {}
    keys: dict[str, list[dict[str, Any]]] = {}
    for table in meta.sorted_tables:
        if table.name == "alembic_version":
            continue
        n = next(counter)
        row = {c.name: _value(c, n) for c in table.columns if not _generated(c)}
        for fk in table.foreign_key_constraints:
            parent = inserted.get(fk.referred_table.name)
            for local, remote in zip(fk.column_keys, fk.elements, strict=True):
                if parent is None or fk.referred_table is table:
                    row[local] = None
                else:
                    row[local] = parent[remote.column.name]
        result = conn.execute(sa.insert(table).values(row))
        row.update(zip(table.primary_key.columns.keys(), result.inserted_primary_key, strict=True))
        inserted[table.name] = row
        keys[table.name] = [{c.name: row[c.name] for c in table.primary_key.columns}]
    return keys


def _generated(column: sa.Column[Any]) -> bool:
    """An integer primary key the database numbers itself."""
    return bool(
        column.primary_key
        and isinstance(column.type, sa.Integer)
        and column.autoincrement in (True, "auto")
        and len(column.table.primary_key.columns) == 1
    )


def test_every_revision_migrates_to_the_newest_with_its_rows(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        cfg = alembic_config()
        counter = itertools.count(1)
        kept: dict[str, list[dict[str, Any]]] = {}
        shipped = revisions()
        assert shipped[0] == "0001"
        for revision in shipped:
            with engine.connect() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)
                conn.commit()
            with engine.begin() as conn:
                assert schema_revision(conn) == revision
                for table, rows in _fill(conn, counter).items():
                    kept.setdefault(table, []).extend(rows)
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            for name, rows in kept.items():
                table = meta.tables[name]
                for key in rows:
                    found = conn.execute(
                        sa.select(sa.func.count())
                        .select_from(table)
                        .where(*(table.c[k] == v for k, v in key.items()))
                    ).scalar()
                    assert found == 1, f"a row of {name} was lost on the way to the newest"
        # Every table of the newest schema held a row from some revision.
        assert set(kept) == set(meta.tables) - {"alembic_version"}
    finally:
        engine.dispose()


def test_a_store_from_the_first_revision_opens_and_serves_at_the_newest(
    database_url: str,
) -> None:
    """The services open an old store as they start: it migrates and their reads work."""
    from services.core.store import open_store

    engine = create_engine(database_url)
    cfg = alembic_config()
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.commit()
    engine.dispose()
    store = open_store(database_url)
    try:
        with store.unit() as session:
            key_id, key = auth.create_key(session, org="acme", role="member")
        with store.unit(write=False) as session:
            assert auth.authenticate(session, key).key_id == key_id
            assert schema_revision(session.connection()) == revisions()[-1]
    finally:
        store.dispose()


@pytest.mark.parametrize("revision", ["0001", "0006"])
def test_the_schema_revision_is_read_from_the_store(database_url: str, revision: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            assert schema_revision(conn) is None
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
            assert schema_revision(conn) == revision
    finally:
        engine.dispose()
