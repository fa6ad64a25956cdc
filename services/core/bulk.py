"""Many rows into one table in one statement, as a report's metric points and events go in.

SQLAlchemy Core's executemany builds a parameter set and runs every column's bind
processor for each row, and each event's JSON is a `json.dumps` of its own; for a report
of 500 events (two rows each) that was most of the report's time. Here the rows travel
as one JSON document, made by one `json.dumps`, that the database takes apart in C
(`json_array_elements` on PostgreSQL, `json_each` on SQLite) in one
`INSERT … SELECT`; a value every row holds (the job, the org, the time) is bound once.
Floats travel as their `repr` and are cast (SQLite's JSON reader rounds numbers; its
cast does not). A value JSON cannot carry (a NaN or an infinity) sends the rows through
SQLAlchemy as before. (No library does this: psycopg's COPY cannot skip a row that
exists, which a series' points must, and SQLite has no bulk path but executemany.)"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from services.core.store import Base


def insert(
    session: Session,
    mapped: type[Base],
    rows: Sequence[Mapping[str, Any]],
    *,
    skip_existing: bool = False,
) -> None:
    """Insert `rows` (each naming every column of the first) into `mapped`'s table within
    the session's transaction; with `skip_existing`, a row whose key exists is left out."""
    if not rows:
        return
    table = cast(sa.Table, mapped.__table__)
    conn = session.connection()
    dialect = conn.dialect
    columns = [table.c[name] for name in rows[0]]
    first = rows[0]
    same = [c for c in columns if all(row[c.name] is first[c.name] for row in rows)]
    varying = [c for c in columns if c not in same]
    document = _document(varying, rows)
    if document is None:
        dialect_insert = postgresql.insert if dialect.name == "postgresql" else sqlite.insert
        statement = dialect_insert(table)
        conn.execute(statement.on_conflict_do_nothing() if skip_existing else statement, list(rows))
        return
    prepare = dialect.identifier_preparer
    names = ", ".join(prepare.quote(c.name) for c in columns)
    target = prepare.format_table(table)
    postgres = dialect.name == "postgresql"
    picked = ", ".join(
        _bound(c, dialect) if c in same else _taken(c, varying.index(c), dialect) for c in columns
    )
    if postgres:
        source = "json_array_elements(%s::json) AS e"
        verb, conflict = "INSERT", " ON CONFLICT DO NOTHING" if skip_existing else ""
    else:
        source = "json_each(?)"
        verb, conflict = "INSERT OR IGNORE" if skip_existing else "INSERT", ""
    conn.exec_driver_sql(
        f"{verb} INTO {target} ({names}) SELECT {picked} FROM {source}{conflict}",
        (*(_constant(c, first[c.name], dialect) for c in same), document),
    )


def _document(varying: list[sa.Column[Any]], rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The varying columns' values, a JSON array a row; None when one cannot travel so."""
    values = []
    for column in varying:
        of_column = [row[column.name] for row in rows]
        if isinstance(column.type, sa.Float):
            if not all(v is not None and math.isfinite(v) for v in of_column):
                return None
            of_column = [repr(float(v)) for v in of_column]
        values.append(of_column)
    try:
        # A row of no varying value is an empty array: the row is still there.
        table = list(zip(*values, strict=True)) if values else [()] * len(rows)
        return json.dumps(table, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _taken(column: sa.Column[Any], index: int, dialect: sa.Dialect) -> str:
    """The SQL that takes a varying column's value from a row of the document."""
    kind = column.type
    if dialect.name == "postgresql":
        if isinstance(kind, sa.JSON):
            return f"e->{index}"
        return f"(e->>{index})::{kind.compile(dialect=dialect)}"
    if isinstance(kind, sa.JSON):
        return f"value -> '$[{index}]'"
    if isinstance(kind, sa.Float):
        return f"CAST(value ->> '$[{index}]' AS REAL)"
    return f"value ->> '$[{index}]'"


def _bound(column: sa.Column[Any], dialect: sa.Dialect) -> str:
    if dialect.name == "postgresql":
        return f"%s::{column.type.compile(dialect=dialect)}"
    return "?"


def _constant(column: sa.Column[Any], value: Any, dialect: sa.Dialect) -> Any:
    """A value bound once, as the driver takes it."""
    if isinstance(column.type, sa.JSON):
        return json.dumps(value)  # as sa.JSON writes it
    process = column.type.bind_processor(dialect)
    return process(value) if process is not None else value
