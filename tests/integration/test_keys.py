"""Keys an org hands out, on real rows (SQLite and PostgreSQL): made, listed, revoked and
rotated by the org's admin within its own limits; refused at once by every process once
revoked, rotated or expired; a key's monthly spend bounding its jobs at create and while
they run; and the audit trail read by key, action and time, page by page."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa

from services.claims.leases import Leases
from services.claims.reports import Reports
from services.core import audit, auth, context, errors, keys
from services.core.audit import AuditEvent
from services.core.auth import ApiKey, Principal
from services.core.config import Config
from services.core.money import rates, windows
from services.core.pagetoken import PageTokens
from services.core.rpc import Authenticator
from services.core.store import Store, utcnow
from services.core.tables import JobRow
from services.jobs.org.keys import Keys
from services.jobs.org.trail import Trail
from tests.integration.test_money import Bench, Clock
from trainyard.job.v1 import job_pb2
from trainyard.org.v1 import org_service_pb2

TOKENS = PageTokens(keys.derive(b"k" * 32, "page-tokens"))


def admin_of(store: Store, org: str = "acme", **limits: object) -> Principal:
    """An admin key of the org, as the interceptor resolves it."""
    with store.unit() as session:
        _, secret = auth.create_key(session, org=org, role="admin", **limits)  # type: ignore[arg-type]
    with store.unit(write=False) as session:
        return auth.authenticate(session, secret)


def create(role: str = "member", **fields: object) -> org_service_pb2.CreateKeyRequest:
    return org_service_pb2.CreateKeyRequest(role=role, **fields)  # type: ignore[arg-type]


def resolve(authenticator: Authenticator, secret: str, org: str = "") -> Principal:
    metadata = {"authorization": f"Bearer {secret}", **({"x-org-id": org} if org else {})}

    async def once() -> Principal:
        return await authenticator.principal(metadata)

    return asyncio.run(once())


def problem(authenticator: Authenticator, secret: str) -> str:
    with pytest.raises(errors.Unauthenticated) as refused:
        resolve(authenticator, secret)
    return refused.value.metadata["problem"]


# -- revoked, rotated, expired: refused by the next call -----------------------------------


def test_a_revoked_key_is_refused_by_the_very_next_call_in_every_process(store: Store) -> None:
    admin = admin_of(store)
    made = Keys(store, TOKENS).create(admin, create())
    # Two processes' authenticators, each having just served the key.
    first, second = Authenticator(store), Authenticator(store)
    assert resolve(first, made.secret).key_id == resolve(second, made.secret).key_id == made.id
    revoked = Keys(store, TOKENS).revoke(admin, made.id)
    assert revoked.status == "revoked" and revoked.HasField("revoke_time")
    assert problem(first, made.secret) == problem(second, made.secret) == "revoked"
    # Revoking again keeps the first revoke's time.
    assert Keys(store, TOKENS).revoke(admin, made.id).revoke_time == revoked.revoke_time


def test_a_rotated_key_keeps_its_id_and_limits_and_refuses_its_old_secret(store: Store) -> None:
    admin = admin_of(store)
    made = Keys(store, TOKENS).create(admin, create(projects=["bots"], label="ci"))
    served = Authenticator(store)
    assert resolve(served, made.secret).projects == ("bots",)
    rotated = Keys(store, TOKENS).rotate(admin, made.id)
    assert (rotated.id, list(rotated.projects), rotated.label) == (made.id, ["bots"], "ci")
    assert rotated.secret and rotated.secret != made.secret
    assert problem(served, made.secret) == "rotated"
    assert resolve(served, rotated.secret).key_id == made.id
    # A revoked key is not rotated back to life.
    Keys(store, TOKENS).revoke(admin, made.id)
    with pytest.raises(errors.InvalidTransition):
        Keys(store, TOKENS).rotate(admin, made.id)


def test_an_expired_key_is_refused_as_expired(store: Store) -> None:
    with store.unit() as session:
        _, secret = auth.create_key(
            session,
            org="acme",
            role="member",
            ttl_seconds=1,
            now=utcnow() - dt.timedelta(seconds=2),
        )
    assert problem(Authenticator(store), secret) == "expired"


def test_a_key_in_use_records_when_it_was_last_used(store: Store) -> None:
    admin = admin_of(store)
    made = Keys(store, TOKENS).create(admin, create())
    assert not made.HasField("last_used_time")

    async def twice() -> None:
        served = Authenticator(store)
        metadata = {"authorization": f"Bearer {made.secret}"}
        await served.principal(metadata)
        await asyncio.gather(*served._marking.values())

    asyncio.run(twice())
    assert Keys(store, TOKENS).get(admin, made.id).HasField("last_used_time")


# -- what an admin may make and see --------------------------------------------------------


def test_an_admin_makes_only_an_orgs_roles(store: Store) -> None:
    admin = admin_of(store)
    for role in ("operator", "platform", "platform-machine"):
        with pytest.raises(errors.PermissionDenied) as refused:
            Keys(store, TOKENS).create(admin, create(role))
        assert refused.value.metadata["field"] == "role"
    with pytest.raises(errors.ValidationError) as bad:
        Keys(store, TOKENS).create(admin, create("wizard"))
    assert bad.value.metadata["field"] == "role" and "wizard" not in str(bad.value)
    made = [Keys(store, TOKENS).create(admin, create(role)) for role in auth.ORG_ROLES]
    assert [k.role for k in made] == list(auth.ORG_ROLES)


@pytest.mark.parametrize(
    ("field", "value"),
    [("projects", ["bots", "x y"]), ("bases", ["../etc"]), ("label", "ty_" + "a" * 40),
     ("monthly_spend_cap", -1), ("ttl_seconds", 0), ("ttl_seconds", 10**10)],
)  # fmt: skip
def test_bad_limits_are_refused_naming_the_field_and_make_nothing(
    store: Store, field: str, value: object
) -> None:
    admin = admin_of(store)
    with pytest.raises(errors.ValidationError) as refused:
        Keys(store, TOKENS).create(admin, create(**{field: value}))
    assert refused.value.metadata["field"] == field
    bad = (
        [value]
        if isinstance(value, str)
        else [v for v in value if v != "bots"]
        if isinstance(value, list)
        else []
    )
    assert all(b not in refused.value.message for b in bad)
    assert Keys(store, TOKENS).list(admin, size=0, token="")[2] == 1  # the admin's own


def test_a_limited_admin_hands_out_no_more_than_it_holds(store: Store) -> None:
    limited = admin_of(store, projects=["bots"], monthly_spend_cap=500, ttl_seconds=3600)
    made = Keys(store, TOKENS)
    for request, field in [
        (create(monthly_spend_cap=100, ttl_seconds=60), "projects"),
        (create(projects=["bots", "web"], monthly_spend_cap=100, ttl_seconds=60), "projects"),
        (create(projects=["bots"], ttl_seconds=60), "monthly_spend_cap"),
        (create(projects=["bots"], monthly_spend_cap=900, ttl_seconds=60), "monthly_spend_cap"),
        (create(projects=["bots"], monthly_spend_cap=100), "ttl_seconds"),
        (create(projects=["bots"], monthly_spend_cap=100, ttl_seconds=7200), "ttl_seconds"),
    ]:
        with pytest.raises(errors.PermissionDenied) as refused:
            made.create(limited, request)
        assert refused.value.metadata["field"] == field
    inside = made.create(limited, create(projects=["bots"], monthly_spend_cap=100, ttl_seconds=60))
    assert inside.monthly_spend_cap == 100 and inside.HasField("expire_time")
    # It sees and manages that key and itself, never the org's wider keys.
    wide = made.create(admin_of(store), create())
    assert {k.id for k in made.list(limited, size=0, token="")[0]} == {inside.id, limited.key_id}
    for act in (made.get, made.revoke, made.rotate):
        with pytest.raises(errors.NotFound):
            act(limited, wide.id)


def test_another_orgs_key_and_the_deployments_keys_answer_as_unknown(store: Store) -> None:
    admin = admin_of(store)
    theirs = Keys(store, TOKENS).create(admin_of(store, "globex"), create())
    with store.unit() as session:
        operator_id, _ = auth.create_key(session, org="acme", role="operator")
    for key_id in (theirs.id, operator_id, "key_0000000000000000", "../x"):
        for act in (Keys(store, TOKENS).get, Keys(store, TOKENS).revoke):
            with pytest.raises(errors.NotFound):
                act(admin, key_id)
    listed = Keys(store, TOKENS).list(admin, size=0, token="")[0]
    assert operator_id not in {k.id for k in listed}


def test_keys_page_newest_first_without_secrets_and_tokens_stay_bound(store: Store) -> None:
    admin = admin_of(store)
    made = [Keys(store, TOKENS).create(admin, create(label=f"k{n}")).id for n in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page, token, total = Keys(store, TOKENS).list(admin, size=2, token=token)
        assert total == 6 and all(not k.HasField("secret") for k in page)
        seen.extend(k.id for k in page)
        if not token:
            break
    assert seen[:5] == made[::-1] and len(seen) == 6
    other = admin_of(store, "globex")
    _, token, _ = Keys(store, TOKENS).list(admin, size=2, token="")
    with pytest.raises(errors.ValidationError):
        Keys(store, TOKENS).list(other, size=2, token=token)


# -- a key's monthly spend -----------------------------------------------------------------


@pytest.fixture
def bench(store: Store, tmp_path: Path) -> Bench:
    clock = Clock()
    config = Config(home=tmp_path, database_url="", free_credit_cents=0)
    leases = Leases(store, config, clock=clock)
    return Bench(store, clock, leases, Reports(store, leases, clock=clock))


def key_job(bench: Bench, key_id: str) -> str:
    job_id = bench.job(budget=100)
    with bench.store.unit() as session:
        session.execute(sa.update(JobRow).where(JobRow.id == job_id).values(key_id=key_id))
    return job_id


def admit(bench: Bench, key_id: str) -> None:
    with bench.store.unit() as session:
        windows.admit(
            session,
            windows.Policy(),
            org="acme",
            project="default",
            resources=job_pb2.Resources(budget=100),
            meter_name=rates.compute_meter("fixture-tiny-llm", "cpu"),
            now=bench.clock(),
            key_id=key_id,
        )


def test_a_keys_cap_stops_its_running_job_and_refuses_its_next_one(bench: Bench) -> None:
    bench.credit(100)
    with bench.store.unit() as session:
        capped, _ = auth.create_key(session, org="acme", role="member", monthly_spend_cap=1)
        free, _ = auth.create_key(session, org="acme", role="member")
    # One CPU window (300 s at 8 cents an hour) is 0.67 cents: the first fits a 1-cent cap.
    job_id = key_job(bench, capped)
    answer = bench.claim()
    assert answer.task.job == job_id and answer.task.held == 300
    bench.clock.advance(200)  # the next window would take the key's jobs past 1 cent
    assert bench.report(answer).held == 300
    bench.clock.advance(70)  # under 40 s left and none granted: stopped
    assert bench.report(answer).cancel is True
    assert bench.status(job_id) == ("stopped", "key_spend_cap")
    with pytest.raises(errors.FailedPrecondition) as refused:
        admit(bench, capped)
    assert refused.value.reason == "SPEND_CAP_EXCEEDED"
    assert refused.value.metadata == {"scope": "key"}
    # The org's other keys are not bound by it.
    admit(bench, free)
    other = key_job(bench, free)
    assert bench.claim().task.job == other


# -- the audit trail -----------------------------------------------------------------------


def write(
    store: Store, name: str, *, org: str = "acme", actor: str = "", when: dt.datetime
) -> None:
    with store.unit() as session:
        session.add(
            AuditEvent(org=org, name=name, subject="s", actor=actor, request_id="r", details={},
                       create_time=when)
        )  # fmt: skip


def test_a_row_written_in_a_call_names_the_calls_key_and_request(store: Store) -> None:
    caller = Principal("key_0123456789abcdef", "acme", "member")
    context.principal_var.set(caller)
    context.request_id.set("req-1")
    try:
        with store.unit() as session:
            audit.record(session, "training.job.cancel.accepted", org="acme", subject="job_x")
    finally:
        context.principal_var.set(None)
        context.request_id.set("")
    with store.unit(write=False) as session:
        row = session.execute(sa.select(AuditEvent.actor, AuditEvent.request_id)).one()
    assert tuple(row) == (caller.key_id, "req-1")


def test_the_trail_filters_by_key_action_and_time_and_pages_newest_first(store: Store) -> None:
    admin = admin_of(store)
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    for n in range(6):
        write(
            store,
            "training.job.create.accepted",
            actor=admin.key_id,
            when=t0 + dt.timedelta(hours=n),
        )
    write(store, "training.data_source.created", actor="key_other0000000000", when=t0)
    write(store, "training.dataXsource.created", when=t0)  # `_` in a prefix is no wildcard
    write(store, "training.job.create.accepted", org="globex", actor=admin.key_id, when=t0)
    trail = Trail(store, TOKENS)

    def read(**filters: object) -> list[object]:
        got = dict(actor="", action="", start_time="", end_time="", size=0, token="")
        got.update(filters)
        return trail.list(admin, **got)[0]  # type: ignore[arg-type]

    mine = read(actor=admin.key_id)
    assert len(mine) == 6 and [e.id for e in mine] == sorted((e.id for e in mine), reverse=True)
    assert {(e.key_role, e.key_org, e.org) for e in mine} == {("admin", "acme", "acme")}
    assert len(read(action="training.job.*")) == 6
    assert [e.action for e in read(action="training.data_*")] == ["training.data_source.created"]
    assert read(action="training.data_source.created")[0].key_role == ""  # no such key
    window = read(start_time="2026-11-01T02:00:00Z", end_time="2026-11-01T04:00:00+00:00")
    assert [e.create_time.ToDatetime(dt.UTC).hour for e in window] == [3, 2]
    # Pages of two, the token bound to its filters and its org.
    seen, token = [], ""
    while True:
        page, token = trail.list(admin, actor=admin.key_id, action="", start_time="",
                                 end_time="", size=2, token=token)  # fmt: skip
        seen.extend(e.id for e in page)
        if not token:
            break
    assert seen == [e.id for e in mine]
    _, token = trail.list(admin, actor=admin.key_id, action="", start_time="", end_time="",
                          size=2, token="")  # fmt: skip
    with pytest.raises(errors.ValidationError):
        read(token=token)  # another filter
    with pytest.raises(errors.ValidationError):
        trail.list(admin_of(store, "globex"), actor=admin.key_id, action="", start_time="",
                   end_time="", size=2, token=token)  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [("start_time", "yesterday"), ("start_time", "2026-11-01T00:00:00"), ("end_time", "1" * 80),
     ("actor", "key x"), ("action", "training.*.x"), ("action", "DROP TABLE")],
)  # fmt: skip
def test_a_bad_filter_is_refused_naming_it(store: Store, field: str, value: str) -> None:
    admin = admin_of(store)
    filters = dict(actor="", action="", start_time="", end_time="", size=0, token="")
    filters[field] = value
    with pytest.raises(errors.ValidationError) as refused:
        Trail(store, TOKENS).list(admin, **filters)  # type: ignore[arg-type]
    assert refused.value.metadata["field"] == field and value not in refused.value.message


def test_a_key_limited_to_projects_does_not_read_the_trail(store: Store) -> None:
    limited = admin_of(store, projects=["bots"])
    with pytest.raises(errors.PermissionDenied):
        Trail(store, TOKENS).list(limited, actor="", action="", start_time="", end_time="",
                                  size=0, token="")  # fmt: skip


def test_keys_are_stored_by_hash_only(store: Store) -> None:
    made = Keys(store, TOKENS).create(admin_of(store), create())
    with store.unit(write=False) as session:
        row = session.get(ApiKey, made.id)
        assert row is not None and row.key_hash == auth.hash_key(made.secret)
        assert made.secret not in repr(session.execute(sa.select(ApiKey.__table__)).all())


def test_a_key_limited_to_projects_does_not_see_another_projects_outputs(bench: Bench) -> None:
    from services.artifacts import store as artifacts

    job_id = bench.job()  # of the project `default`
    now = utcnow()
    with bench.store.unit() as session:
        for sha, producer in (("a" * 64, job_id), ("b" * 64, "")):
            row = artifacts.add_placeholder(
                session, org="acme", sha256=sha, size=1, kind="checkpoint", name="x",
                job_id=producer, retention_policy="standard", ttl_seconds=None, meta={}, now=now,
            )  # fmt: skip
            row.status, row.stored_time = "stored", now
    for projects, seen in ((("bots",), {"b" * 64}), (("default",), {"a" * 64, "b" * 64})):
        token = context.principal_var.set(Principal("key_x", "acme", "member", projects=projects))
        try:
            with bench.store.unit(write=False) as session:
                listed = {r.sha256 for r in artifacts.stored_objects(session, "acme", "")}
                assert listed == seen
                if "a" * 64 not in seen:
                    with pytest.raises(errors.NotFound):
                        artifacts.visible_object(session, "acme", "a" * 64, now)
                    with pytest.raises(errors.NotFound):
                        artifacts.owned_job(session, "acme", job_id)
        finally:
            context.principal_var.reset(token)


def test_a_key_limited_to_projects_reads_their_charges_and_the_orgs_own(
    bench: Bench, tmp_path: Path
) -> None:
    from services.core.money import ledger
    from services.meter.service import MeterService

    bench.credit(100)
    with bench.store.unit() as session:
        wallet = ledger.wallet(session, "acme", free_cents=0, now=bench.clock())
        for project in ("bots", "web"):
            ledger.post(session, wallet, f"compute/{project}", "compute", -1, now=bench.clock(),
                        project=project)  # fmt: skip
    meter = MeterService(bench.store, Config(home=tmp_path, database_url=""), TOKENS)
    limited = Principal("key_x", "acme", "member", projects=("bots",))
    names = {e.name for e in meter.entries(limited, size=0, token="")[0]}
    assert names == {"credit/top-up", "compute/bots"}
    assert len(meter.entries(Principal("key_y", "acme", "member"), size=0, token="")[0]) == 3
