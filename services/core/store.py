"""The SQL store every service shares: engine, declarative base, unit of work, migrations.

SQLite (the embedded default) runs in WAL mode with foreign keys and a busy timeout;
a write unit takes the write lock up front (`BEGIN IMMEDIATE`) so two writers queue
instead of failing on a lock upgrade. PostgreSQL is chosen by URL.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from services.core import errors, trace
from services.core.wakeups import Wakeups, marked

log = logging.getLogger(__name__)
T = TypeVar("T")

_NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
_MIGRATIONS = Path(__file__).with_name("migrations")


class Base(DeclarativeBase):
    """The declarative base of every table; each service declares the tables it owns."""

    metadata = sa.MetaData(naming_convention=_NAMING)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class UtcDateTime(sa.types.TypeDecorator[dt.datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(dt.UTC)

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def normalise_url(url: str) -> str:
    """Let `postgresql://` mean the psycopg 3 driver, which is the one installed."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


# A pooled PostgreSQL connection idle this long is pinged before it is handed out.
PING_IDLE_SECONDS = 1.0


def create_engine(url: str) -> Engine:
    url = normalise_url(url)
    if not url.startswith("sqlite"):
        engine = sa.create_engine(url, pool_size=10, max_overflow=20)
        _ping_when_idle(engine)
        _reads_only_read(engine)
        trace.statements(engine)
        return engine

    path = sa.engine.make_url(url).database
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN is ours (see _on_begin).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get("trainyard_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    trace.statements(engine)
    return engine


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's `pool_pre_ping`, but only for a connection idle a while: one the
    database dropped (a restart) is replaced before use, and a busy service does not pay
    a round trip on every unit of work. (The pool has no such option; its documented
    checkout event does it.)"""

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", 0.0) < PING_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception:
            raise sa.exc.DisconnectionError() from None  # the pool connects afresh


def _reads_only_read(engine: Engine) -> None:
    """A read unit runs on PostgreSQL without a transaction (see `Store.unit`), so what it
    wrote would stay: a statement other than a read there is refused before it is sent."""

    @event.listens_for(engine, "before_cursor_execute")
    def _sending(conn: sa.Connection, _cursor: Any, statement: str, *_args: Any) -> None:
        options = conn.get_execution_options()
        if options.get("trainyard_write", True) or options.get("isolation_level") != "AUTOCOMMIT":
            return
        if statement.lstrip()[:6].upper() != "SELECT":
            raise RuntimeError("a read unit of work may only read")


class Store:
    """Units of work over one engine: a write unit commits on a clean exit, anything
    else rolls back."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.wakeups = Wakeups()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextlib.contextmanager
    def unit(self, *, write: bool = True) -> Iterator[Session]:
        with self._sessions() as session:
            options: dict[str, Any] = {"trainyard_write": write}
            if not write and self.dialect == "postgresql":
                # Under READ COMMITTED each statement reads afresh, in a transaction or not:
                # a read unit sends no BEGIN and no ROLLBACK, two round trips fewer.
                options["isolation_level"] = "AUTOCOMMIT"
            session.connection(execution_options=options)
            try:
                yield session
                if write:
                    session.commit()
                    self.wakeups.publish(marked(session))
                else:
                    session.rollback()
            except BaseException:
                session.rollback()
                raise

    def dispose(self) -> None:
        self.engine.dispose()


# PostgreSQL's serialization failure and deadlock: the server rolled the transaction back
# and it may simply run again.
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01"})


def transient(exc: BaseException) -> bool:
    """Whether a database error only lost a race with another transaction."""
    return isinstance(exc, sa.exc.DBAPIError) and (
        getattr(exc.orig, "sqlstate", None) in _TRANSIENT_SQLSTATES
    )


def retrying(
    work: Callable[[], T],
    *,
    attempts: int = 5,
    on: tuple[type[BaseException], ...] = (StaleDataError,),
) -> T:
    """Run a unit of work again when a concurrent writer changed its rows first (a row
    version moved, a deadlock or serialization failure); CONFLICT once `attempts` all
    lost the race."""
    for attempt in range(attempts):
        try:
            return work()
        except Exception as exc:
            if not (isinstance(exc, on) or transient(exc)):
                raise
            if attempt == attempts - 1:
                raise errors.Conflict() from None
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[sa.Connection]:
    """Serialise migrations between processes starting together."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_advisory_lock(7301)"))
            conn.commit()
            try:
                yield conn
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(7301)"))
                conn.commit()
        return
    path = engine.url.database
    lock_path = Path(f"{path}.migrate.lock") if path and path != ":memory:" else None
    if lock_path is None:
        with engine.connect() as conn:
            yield conn
        return
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            with engine.connect() as conn:
                yield conn
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def alembic_config() -> AlembicConfig:
    """Alembic's configuration for the store's migrations; set `attributes["connection"]`
    before running a command."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    return cfg


def schema_revision(conn: sa.Connection) -> str | None:
    """The revision the store's schema is at; None before the first migration."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def head_revision() -> str:
    """The newest revision this code ships."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(_MIGRATIONS)).get_current_head()
    assert head is not None
    return head


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision; safe to call from every process."""
    cfg = alembic_config()
    with _migration_lock(engine) as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()


def open_store(url: str, *, run_migrations: bool = True) -> Store:
    engine = create_engine(url)
    if run_migrations:
        migrate(engine)
    return Store(engine)
