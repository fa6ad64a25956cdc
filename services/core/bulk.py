"""Many rows into one table in one statement, as a report's metric points and events go in.

SQLAlchemy Core's executemany builds a parameter set and runs every column's bind
processor for each row; for a report of 500 events (two rows each) that was most of the
report's time. Here the rows go to the driver as they are: on SQLite one executemany, a
column's value processed once when every row holds the same one (a report's job, org and
time); on PostgreSQL one `INSERT … SELECT … FROM json_to_recordset(…)`, the rows one JSON
document the server takes apart, a single round trip and a single `json.dumps` whatever
the count (psycopg's COPY cannot skip a row that exists, which the series' points must,
and its array parameters are built in Python, row by row). A value JSON cannot carry (a
NaN or infinite point) sends the rows as arrays instead."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import sqlalchemy as sa
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
    quote = dialect.identifier_preparer.quote
    columns = [table.c[name] for name in rows[0]]
    names = ", ".join(quote(c.name) for c in columns)
    target = dialect.identifier_preparer.format_table(table)
    if dialect.name == "postgresql":
        conflict = " ON CONFLICT DO NOTHING" if skip_existing else ""
        # A value every row holds (the job, the org, the time) is bound once, not repeated.
        same = {c.name for c in columns if all(row[c.name] is rows[0][c.name] for row in rows)}
        varying = [c for c in columns if c.name not in same]
        try:
            document = json.dumps([[row[c.name] for c in varying] for row in rows], allow_nan=False)
        except ValueError:  # a NaN or an infinity: as arrays
            values = [_processed(c, [row[c.name] for row in rows], dialect) for c in columns]
            arrays = ", ".join(f"%s::{_array_of(c, dialect)}" for c in columns)
            picked = ", ".join(
                f"c{n}::json" if isinstance(c.type, sa.JSON) else f"c{n}"
                for n, c in enumerate(columns)
            )
            aliases = ", ".join(f"c{n}" for n in range(len(columns)))
            conn.exec_driver_sql(
                f"INSERT INTO {target} ({names}) SELECT {picked} "
                f"FROM unnest({arrays}) AS u({aliases}){conflict}",
                tuple(values),
            )
            return
        picked = ", ".join(
            f"%s::{c.type.compile(dialect=dialect)}"
            if c.name in same
            else f"(e->>{varying.index(c)})::{c.type.compile(dialect=dialect)}"
            for c in columns
        )
        conn.exec_driver_sql(
            f"INSERT INTO {target} ({names}) SELECT {picked} "
            f"FROM json_array_elements(%s::json) AS e{conflict}",
            (*(_bound(rows[0][c.name]) for c in columns if c.name in same), document),
        )
    else:
        values = [_processed(c, [row[c.name] for row in rows], dialect) for c in columns]
        marks = ", ".join("?" for _ in columns)
        verb = "INSERT OR IGNORE" if skip_existing else "INSERT"
        conn.exec_driver_sql(
            f"{verb} INTO {target} ({names}) VALUES ({marks})", list(zip(*values, strict=True))
        )


def _bound(value: Any) -> Any:
    """A value bound once: a mapping as the JSON text it is cast from."""
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def _processed(column: sa.Column[Any], values: list[Any], dialect: sa.Dialect) -> list[Any]:
    """The column's values as the driver takes them."""
    if isinstance(column.type, sa.JSON):
        return [json.dumps(v) for v in values]  # as sa.JSON writes it: None as 'null'
    process = column.type.bind_processor(dialect)
    if process is None:
        return values
    first = values[0]
    if all(v is first for v in values):
        return [process(first)] * len(values)
    return [process(v) for v in values]


def _array_of(column: sa.Column[Any], dialect: sa.Dialect) -> str:
    if isinstance(column.type, sa.JSON):
        return "text[]"
    return f"{column.type.compile(dialect=dialect)}[]"
