"""Hop timestamps on a job's way from create to assignment, for bench/claims.py's
breakdown: with `TRAINYARD_TRACE` naming a file, every process of a stack appends one JSON
line a hop (`{"hop", "t", ...ids}`, `t` the wall clock the processes of one machine
share). Unset, as in any deployment, a hop costs one test of a module global.

(A span library would do, but OpenTelemetry's exporters run a thread and a batch queue in
every process for what is here one append; the benchmark needs only the timestamps.)"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

_FD = (
    os.open(os.environ["TRAINYARD_TRACE"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    if os.environ.get("TRAINYARD_TRACE")
    else None
)


def hop(name: str, **ids: object) -> None:
    """Record that `name` happened now (to the job, task or topics in `ids`)."""
    if _FD is None:
        return
    # One write of one short line to a file opened O_APPEND: lines of processes writing
    # together do not interleave.
    os.write(
        _FD,
        (json.dumps({"hop": name, "t": time.time(), "pid": os.getpid(), **ids}) + "\n").encode(),
    )


def statements(engine: sa.Engine) -> None:
    """Record each statement `engine` sends as a hop (`sql`, its first words), so the
    breakdown counts the statements a hop ran: a transaction's end too, and on
    PostgreSQL its start (the driver sends BEGIN itself; SQLite's is a statement here)."""
    if _FD is None:
        return

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _sent(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        hop("sql", sql=" ".join(statement.split())[:120])

    def bracket(name: str) -> Callable[[sa.Connection], None]:
        def sent(conn: sa.Connection) -> None:
            # A read unit on PostgreSQL runs without a transaction (`Store.unit`).
            if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
                hop("sql", sql=name.upper())

        return sent

    for name in ("commit", "rollback") + (("begin",) if engine.dialect.name != "sqlite" else ()):
        sa.event.listen(engine, name, bracket(name))
