"""The shared store on SQLite and PostgreSQL: migrations, keys, units of work."""

from __future__ import annotations

import threading

import psycopg
import pytest
import sqlalchemy as sa

from services.core import audit, auth, errors
from services.core import store as store_module
from services.core.store import Base, Store, migrate, utcnow


def test_migrations_match_the_declared_tables(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    import services.artifacts.store
    import services.claims.clients.store
    import services.core.audit
    import services.core.lifecycle
    import services.jobs.store  # noqa: F401

    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_migrating_again_changes_nothing(store: Store) -> None:
    migrate(store.engine)
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def test_a_created_key_authenticates_with_its_org_and_role(store: Store) -> None:
    with store.unit() as session:
        _, key = auth.create_key(session, org="acme", role="member")
    with store.unit(write=False) as session:
        principal = auth.authenticate(session, key)
    assert (principal.org, principal.role) == ("acme", "member")


def test_the_store_keeps_only_the_hash_of_a_key(store: Store) -> None:
    with store.unit() as session:
        _, key = auth.create_key(session, org="acme", role="member")
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM api_keys")).all()
    assert key not in repr(rows)
    assert auth.hash_key(key) in repr(rows)


@pytest.mark.parametrize("presented", [None, "", "ty_not-a-key", "Bearer x", "x" * 300])
def test_anything_but_a_live_key_is_unauthenticated(store: Store, presented: str | None) -> None:
    with store.unit(write=False) as session, pytest.raises(errors.Unauthenticated):
        auth.authenticate(session, presented)


def test_a_revoked_key_no_longer_authenticates(store: Store) -> None:
    with store.unit() as session:
        key_id, key = auth.create_key(session, org="acme", role="member")
    with store.unit() as session:
        session.get(auth.ApiKey, key_id).revoke_time = utcnow()  # type: ignore[union-attr]
    with store.unit(write=False) as session, pytest.raises(errors.Unauthenticated) as refused:
        auth.authenticate(session, key)
    assert refused.value.metadata == {"problem": "revoked"}
    assert "trainyard admin create-key" in refused.value.message


@pytest.mark.parametrize(
    ("presented", "problem"),
    [(None, "missing"), ("", "missing"), ("Bearer x", "malformed"), ("ty_a b", "malformed"),
     ("x" * 300, "malformed"), ("ty_" + "A" * 43, "unknown")],
)  # fmt: skip
def test_a_refused_key_says_which_problem_it_has(
    store: Store, presented: str | None, problem: str
) -> None:
    with store.unit() as session:
        key_id, _ = auth.create_key(session, org="acme", role="member")
        session.flush()
        session.get(auth.ApiKey, key_id).revoke_time = utcnow()  # type: ignore[union-attr]
    with store.unit(write=False) as session, pytest.raises(errors.Unauthenticated) as refused:
        auth.authenticate(session, presented)
    assert refused.value.metadata == {"problem": problem}
    assert refused.value.message == auth.PROBLEMS[problem]


def test_a_key_without_bearer_is_malformed() -> None:
    with pytest.raises(errors.Unauthenticated) as refused:
        auth.bearer({"authorization": "ty_" + "A" * 43})
    assert refused.value.metadata == {"problem": "malformed"}
    assert auth.bearer({}) is None


@pytest.mark.parametrize(
    ("role", "crosses"),
    [
        ("member", False),
        ("admin", False),
        ("executor", False),
        ("platform", True),
        ("operator", True),
    ],
)
def test_only_platform_and_operator_keys_act_in_another_org(
    store: Store, role: str, crosses: bool
) -> None:
    with store.unit() as session:
        _, key = auth.create_key(session, org="acme", role=role)
    with store.unit(write=False) as session:
        if crosses:
            assert auth.authenticate(session, key, "globex").org == "globex"
        else:
            with pytest.raises(errors.PermissionDenied):
                auth.authenticate(session, key, "globex")


def test_a_failed_unit_of_work_leaves_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError), store.unit() as session:
        audit.record(session, "platform.key.created", org="acme")
        session.flush()
        raise RuntimeError("boom")
    with store.unit(write=False) as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(audit.AuditEvent)) == 0


def test_a_read_unit_writes_nothing(store: Store) -> None:
    """On PostgreSQL a read unit runs without a transaction, so a write there would stay:
    it is refused before it is sent. On SQLite it rolls back with the unit."""
    with store.unit() as session:
        _, key = auth.create_key(session, org="acme", role="member")
    refused = RuntimeError if store.dialect == "postgresql" else errors.Unauthenticated
    with pytest.raises(refused), store.unit(write=False) as session:
        session.execute(sa.update(auth.ApiKey).values(revoke_time=utcnow()))
        auth.authenticate(session, key)  # SQLite: revoked inside the unit, as written
    with store.unit(write=False) as session:
        assert auth.authenticate(session, key).org == "acme"


def test_concurrent_writers_all_commit(store: Store) -> None:
    failures: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for _ in range(10):
                with store.unit() as session:
                    count = session.scalar(sa.select(sa.func.count()).select_from(audit.AuditEvent))
                    audit.record(session, "platform.key.created", org="acme", subject=str(count))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    with store.unit(write=False) as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(audit.AuditEvent)) == 80


def test_audit_refuses_an_unreserved_name(store: Store) -> None:
    with pytest.raises(ValueError), store.unit() as session:
        audit.record(session, "anything.goes", org="acme")


def test_a_connection_the_database_dropped_is_replaced_before_use(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pooled PostgreSQL connection idle a while is pinged when handed out, so one the
    server dropped (a restart) never fails the next unit of work."""
    if store.dialect != "postgresql":
        pytest.skip("SQLite has no server to drop a connection")

    def kill_pooled() -> None:
        with store.unit(write=False) as session:
            pid = session.scalar(sa.text("SELECT pg_backend_pid()"))
        url = store.engine.url.set(drivername="postgresql").render_as_string(False)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    kill_pooled()
    monkeypatch.setattr(store_module, "PING_IDLE_SECONDS", 10**6)  # never idle long enough
    with pytest.raises(sa.exc.OperationalError), store.unit(write=False) as session:
        session.scalar(sa.text("SELECT 1"))

    kill_pooled()
    monkeypatch.setattr(store_module, "PING_IDLE_SECONDS", 0.0)
    with store.unit(write=False) as session:
        assert session.scalar(sa.text("SELECT 1")) == 1


def test_revoke_key_revokes_once_and_knows_no_other_id(store: Store) -> None:
    with store.unit() as session:
        key_id, key = auth.create_key(session, org="acme", role="member")
    with store.unit() as session:
        assert auth.revoke_key(session, key_id) and auth.revoke_key(session, key_id)
        assert not auth.revoke_key(session, "key_unknown")
    with store.unit(write=False) as session, pytest.raises(errors.Unauthenticated) as refused:
        auth.authenticate(session, key)
    assert refused.value.metadata == {"problem": "revoked"}
