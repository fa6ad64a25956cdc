"""Every row of a store as one consistent snapshot, and back into an empty store: what a
backup carries of the database.

The snapshot is one read transaction: REPEATABLE READ on PostgreSQL (what `pg_dump` takes)
and a WAL read transaction on SQLite, both a single point in time however the services
write meanwhile. Rows are JSON, one line each, by table, read and written through the
schema reflected at the snapshot's revision; so one format serves both stores, a backup
of either restores into either, and a backup of an older revision loads into that
revision's schema before the migrations bring it to the newest.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Engine

from services.core.store import alembic_config, schema_revision

# Rows held in memory at once, reading and writing.
BATCH = 2000


def tables(conn: sa.Connection) -> list[sa.Table]:
    """The store's tables as its schema holds them now, parents before children."""
    meta = sa.MetaData()
    meta.reflect(conn)
    return [t for t in meta.sorted_tables if t.name != "alembic_version"]


@contextlib.contextmanager
def snapshot(engine: Engine) -> Iterator[sa.Connection]:
    """A connection reading the store at one point in time, until it closes."""
    options = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    with engine.connect().execution_options(**options) as conn, conn.begin():
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
        yield conn


def revision(conn: sa.Connection) -> str:
    found = schema_revision(conn)
    if found is None:
        raise ValueError("the store has no schema")
    return found


def rows(conn: sa.Connection, table: sa.Table) -> Iterator[dict[str, Any]]:
    """The table's rows as JSON values, in primary key order."""
    query = sa.select(table).order_by(*table.primary_key.columns)
    result = conn.execution_options(stream_results=True, yield_per=BATCH).execute(query)
    encoders = [(c.name, _encoder(c.type)) for c in table.columns]
    for row in result:
        yield {name: encode(value) for (name, encode), value in zip(encoders, row, strict=True)}


def upgrade(conn: sa.Connection, to: str) -> None:
    """Migrate the schema on `conn` to revision `to`, in the connection's transaction."""
    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, to)


def load(conn: sa.Connection, table_rows: Iterable[tuple[str, Iterable[dict[str, Any]]]]) -> None:
    """Insert each table's rows, parents first (the order `tables` gave them in), and move
    PostgreSQL's id sequences past the ids loaded; in the caller's transaction."""
    known = {t.name: t for t in tables(conn)}
    for name, items in table_rows:
        table = known[name]
        decoders = {c.name: _decoder(c.type) for c in table.columns}
        batch: list[dict[str, Any]] = []
        for item in items:
            batch.append({k: decoders[k](v) for k, v in item.items()})
            if len(batch) >= BATCH:
                conn.execute(sa.insert(table), batch)
                batch = []
        if batch:
            conn.execute(sa.insert(table), batch)
    if conn.dialect.name == "postgresql":
        for table in known.values():
            _advance_sequence(conn, table)


def _advance_sequence(conn: sa.Connection, table: sa.Table) -> None:
    (column, *more) = table.primary_key.columns
    if more or not isinstance(column.type, sa.Integer):
        return
    sequence = conn.execute(
        sa.select(sa.func.pg_get_serial_sequence(table.name, column.name))
    ).scalar()
    if sequence:
        top = conn.execute(sa.select(sa.func.max(column))).scalar()
        if top is not None:
            conn.execute(sa.select(sa.func.setval(sequence, top)))


def _encoder(kind: sa.types.TypeEngine[Any]) -> Any:
    if isinstance(kind, sa.DateTime):
        return lambda v: None if v is None else _utc(v).isoformat()
    if isinstance(kind, sa.LargeBinary):
        return lambda v: None if v is None else base64.b64encode(v).decode()
    return lambda v: v


def _decoder(kind: sa.types.TypeEngine[Any]) -> Any:
    if isinstance(kind, sa.DateTime):
        return lambda v: None if v is None else dt.datetime.fromisoformat(v)
    if isinstance(kind, sa.LargeBinary):
        return lambda v: None if v is None else base64.b64decode(v)
    return lambda v: v


def _utc(value: dt.datetime) -> dt.datetime:
    """Times are stored in UTC; SQLite reads them back without their zone."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
