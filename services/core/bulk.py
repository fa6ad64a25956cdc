"""A run of metric points written in one go, as a report's metrics are: each point a row
of the job's series (`job_metrics`; a point stored already is kept) and an event of its
record (`job_events`, numbered on from `first_seq`).

Both tables take their rows from one JSON document, made by one `json.dumps` of
`[name, step, value]` rows, that the database takes apart in C (`json_each` on SQLite,
`json_array_elements` on PostgreSQL, where one statement writes both tables); what every
row holds (the job, the org, the time) is bound once. Building a dict, a parameter set and
a `json.dumps` for each row of each table was most of a report's time. Values travel as
their `repr`: the series casts it (SQLite's JSON reader rounds numbers; its cast does
not), and the event's `data` is written around it as JSON text, exactly as reported. A
value JSON cannot carry (a NaN or an infinity: a diverged run's loss) sends the rows
through SQLAlchemy's executemany instead, and is kept as an event only. (No library does
this: psycopg's COPY cannot skip a row that exists, which a series' points must, and
SQLite has no bulk path but executemany.)"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from services.core.store import UtcDateTime
from services.core.tables import EventRow, MetricRow


class Point(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def value(self) -> float: ...


# A row of the document, taken apart: its name, step and value (as text) and its place.
_SQLITE_ROWS = (
    "SELECT key AS place, value ->> '$[0]' AS name, value ->> '$[1]' AS step,"
    " value ->> '$[2]' AS value FROM json_each(:document)"
)
_SQLITE_SERIES = (
    "INSERT OR IGNORE INTO job_metrics (job_id, attempt_number, name, step, value, create_time)"
    f" SELECT :job, :attempt, name, step, CAST(value AS REAL), :series_time FROM ({_SQLITE_ROWS})"
)


def _event_data(quoted_name: str) -> str:
    """An event's `data`, JSON text written around the row's name, step and value."""
    return f"""'{{"name":' || {quoted_name} || ',"step":' || step || ',"value":' || value || '}}'"""


_SQLITE_EVENTS = (
    "INSERT INTO job_events (job_id, seq, org, type, attempt_number, data, create_time)"
    " SELECT :job, :first + place, :org, 'metric', :attempt,"
    f" {_event_data('json_quote(name)')}, :event_time FROM ({_SQLITE_ROWS})"
)
# One statement: the rows, taken apart once, feed both inserts.
_POSTGRES = f"""WITH points AS (
  SELECT place - 1 AS place, e ->> 0 AS name, (e ->> 1)::integer AS step, e ->> 2 AS value
  FROM json_array_elements(CAST(:document AS json)) WITH ORDINALITY AS rows (e, place)
), series AS (
  INSERT INTO job_metrics (job_id, attempt_number, name, step, value, create_time)
  SELECT :job, :attempt, name, step, CAST(value AS double precision), :series_time FROM points
  ON CONFLICT DO NOTHING
)
INSERT INTO job_events (job_id, seq, org, type, attempt_number, data, create_time)
SELECT :job, :first + place, :org, 'metric', :attempt,
  CAST({_event_data("to_json(name)::text")} AS json), :event_time FROM points"""


def _statement(sql: str) -> sa.TextClause:
    """`sql` with its times bound as timestamps stored in UTC."""
    times = [name for name in ("series_time", "event_time") if f":{name}" in sql]
    return sa.text(sql).bindparams(*(sa.bindparam(t, type_=UtcDateTime()) for t in times))


_STATEMENTS = {
    "sqlite": (_statement(_SQLITE_SERIES), _statement(_SQLITE_EVENTS)),
    "postgresql": (_statement(_POSTGRES),),
}


def add_metric_run(
    session: Session,
    *,
    job_id: str,
    org: str,
    attempt: int,
    first_seq: int,
    points: Sequence[Point],
    series_time: dt.datetime,
    event_time: dt.datetime,
) -> None:
    """Write `points` within the session's transaction: each to the job's series and as
    its next event, the first numbered `first_seq`."""
    if not points:
        return
    params: dict[str, Any] = {
        "job": job_id,
        "org": org,
        "attempt": attempt,
        "first": first_seq,
        "series_time": series_time,
        "event_time": event_time,
    }
    values = [p.value for p in points]
    if not all(map(math.isfinite, values)):
        _add_by_executemany(session, points, params)
        return
    params["document"] = json.dumps(
        [[p.name, p.step, repr(v)] for p, v in zip(points, values, strict=True)]
    )
    for statement in _STATEMENTS[session.get_bind().dialect.name]:
        session.execute(statement, params)


def _add_by_executemany(session: Session, points: Sequence[Point], run: dict[str, Any]) -> None:
    """The rows through SQLAlchemy's executemany, for values JSON cannot carry: a NaN or
    an infinity is kept as its event but is no point of a chart (SQLite cannot store it).
    `run` holds what every row of the run shares, as `add_metric_run` binds it."""
    dialect_insert = (
        postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    )
    series = [
        {"job_id": run["job"], "attempt_number": run["attempt"], "name": p.name, "step": p.step,
         "value": p.value, "create_time": run["series_time"]}
        for p in points
        if math.isfinite(p.value)
    ]  # fmt: skip
    events = [
        {"job_id": run["job"], "seq": run["first"] + n, "org": run["org"], "type": "metric",
         "attempt_number": run["attempt"],
         "data": {"name": p.name, "step": p.step, "value": json_double(p.value)},
         "create_time": run["event_time"]}
        for n, p in enumerate(points)
    ]  # fmt: skip
    if series:
        session.execute(dialect_insert(MetricRow).on_conflict_do_nothing(), series)
    session.execute(sa.insert(EventRow), events)


def json_double(value: float) -> float | str:
    """A value as proto3's JSON writes a double: a NaN or an infinity as its name."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
