"""The role table and the org a key may act in: every method of every service is placed,
each role does only its own work, and only platform and operator keys leave their org."""

from __future__ import annotations

import asyncio
import contextlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf.descriptor import ServiceDescriptor

import trainyard
from gateway.render import SERVES
from services.claims.server import roles_of
from services.core import audit, auth, errors, roles
from services.core.config import Config
from services.core.rpc import Authenticator, GatewayInterceptor
from services.core.store import Base, Store, create_engine
from tests.support import service_descriptors

CLAIMS = {"Connect", "ClaimTask", "ReportTask", "RegisterTaskArtifact", "ReadTaskInput"}


def methods_of(role: str) -> set[str]:
    return {
        method
        for table in roles.TABLE.values()
        for method, allowed in table.items()
        if role in allowed
    }


def test_the_generated_services_are_all_found() -> None:
    names = {s.full_name for s in service_descriptors()}
    assert {
        "trainyard.job.v1.JobService",
        "trainyard.claim.v1.ClaimService",
        "trainyard.artifact.v1.ArtifactService",
        "trainyard.meter.v1.MeterService",
        "trainyard.client.v1.ClientService",
    } <= names
    # No service package escapes the glob above: every versioned contract package is found.
    root = Path(trainyard.__file__).parent
    packages = {
        m.name
        for m in pkgutil.iter_modules(trainyard.__path__)
        if m.ispkg and (root / m.name / "v1").is_dir()
    }
    # `tinker/v1` holds the official Tinker SDK's messages only (the wire's protobuf).
    assert {n.split(".")[1] for n in names} == packages - {"common", "tinker"}


@pytest.mark.parametrize("service", service_descriptors(), ids=lambda s: s.name)
def test_every_method_of_every_service_names_its_roles(service: ServiceDescriptor) -> None:
    table = roles.for_service(service.full_name)
    missing = [m.name for m in service.methods if not table.get(m.name)]
    assert missing == [], f"place these methods in services/core/roles.py: {missing}"


def test_the_gateway_routes_every_service_to_one_upstream() -> None:
    routed = [full for served in SERVES.values() for full in served]
    assert sorted(routed) == sorted(s.full_name for s in service_descriptors())
    assert SERVES["claims"] == (
        "trainyard.claim.v1.ClaimService",
        "trainyard.client.v1.ClientService",
    )


def test_an_orgs_users_create_training_clients_unless_the_deployment_keeps_it_its_own() -> None:
    default = Config.from_env({})
    assert roles_of(default)["CreateTrainingClient"] == roles.ORG_USERS
    kept = Config.from_env({"TRAINYARD_TRAIN_CLIENTS_BY_MEMBERS": "0"})
    assert roles_of(kept)["CreateTrainingClient"] == roles.DEPLOYMENT
    assert roles_of(kept)["RunForwardBackward"] == roles.ORG_USERS


def test_a_process_serving_two_services_checks_both_tables() -> None:
    merged = roles.for_services("trainyard.job.v1.JobService", "trainyard.client.v1.ClientService")
    assert merged["CreateJob"] == roles.ORG_USERS
    assert merged["CreateTrainingClient"] == roles.DEPLOYMENT
    assert merged["RunForwardBackward"] == roles.ORG_USERS
    # The interceptor looks a method up by its short name, so two tables must not overlap.
    with pytest.raises(ValueError, match="CreateJob"):
        roles.for_services("trainyard.job.v1.JobService", "trainyard.job.v1.JobService")


def test_the_table_names_only_known_roles() -> None:
    named = {
        role for table in roles.TABLE.values() for allowed in table.values() for role in allowed
    }
    assert named <= {*auth.ROLES, *roles.TOKEN_HOLDERS}


def test_only_a_download_is_open_to_whoever_holds_its_token() -> None:
    """A download URL's sealed token is its credential; every other method asks a key,
    and no key's role is the token holders'."""
    assert {m for t in roles.TABLE.values() for m, a in t.items() if a == roles.TOKEN_HOLDERS} == {
        "DownloadArtifact"
    }
    assert roles.TOKEN_HOLDERS.isdisjoint(auth.ROLES)


def test_an_executor_claims_reports_and_registers_and_nothing_else() -> None:
    assert methods_of("executor") == CLAIMS


def test_people_never_do_a_machines_work() -> None:
    for role in ("member", "admin", "operator"):
        assert methods_of(role).isdisjoint(CLAIMS), role


ORG_ADMIN = {"SetSpendCap", "CreateKey", "ListKeys", "GetKey", "RevokeKey", "RotateKey",
             "ListAuditEntries", "CreateWebhook", "DeleteWebhook",
             "RedeliverWebhookDelivery"}  # fmt: skip


def test_an_admin_does_what_a_member_does_and_keeps_its_orgs_money_keys_and_trail() -> None:
    # An org's admins also decide where its webhooks send its events.
    assert methods_of("admin") == methods_of("member") | ORG_ADMIN
    assert "GetLimits" in methods_of("member")
    assert methods_of("admin") < methods_of("operator")
    assert methods_of("operator") - methods_of("admin") == {
        "SweepArtifacts",
        "SweepStorage",
        "SetRate",
        "CreditWallet",
        "CreateTrainingClient",
    }


def test_the_platform_runs_the_internal_and_executor_methods_only() -> None:
    assert methods_of("platform") == CLAIMS | {
        "GrantJobArtifact",
        "ConfirmJobArtifact",
        "ReadArtifact",
        "RecordProvenance",
        "EstimatePrice",
        "ListPublished",
        "GetArtifact",  # ReadTaskInput's download URL, read in the task's org
    }
    assert "CreateJob" not in methods_of("platform")


def test_the_platforms_executor_runs_the_executor_methods_only() -> None:
    """Its key is in every trainer's executor: nothing internal to the services, no org's
    objects read or granted, no money moved."""
    assert methods_of("platform-machine") == CLAIMS


def test_a_method_the_table_does_not_name_is_allowed_to_nobody() -> None:
    assert roles.allowed("/trainyard.job.v1.JobService/NoSuchMethod") == frozenset()
    assert roles.allowed("/trainyard.nope.v1.NopeService/CreateJob") == frozenset()
    assert roles.allowed("/trainyard.job.v1.JobService/CreateJob") == roles.ORG_USERS


# -- which org a key acts in ------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    engine = create_engine(f"sqlite:///{tmp_path / 'keys.db'}")
    Base.metadata.create_all(engine, tables=[auth.ApiKey.__table__, audit.AuditEvent.__table__])  # type: ignore[list-item]
    yield Store(engine)
    engine.dispose()


def key(store: Store, role: str, org: str = "acme") -> str:
    with store.unit() as session:
        return auth.create_key(session, org=org, role=role)[1]


@pytest.mark.parametrize("role", ["member", "admin", "executor"])
def test_an_orgs_own_keys_never_act_in_another_org(store: Store, role: str) -> None:
    presented = key(store, role)
    with store.unit(write=False) as session:
        with pytest.raises(errors.PermissionDenied):
            auth.authenticate(session, presented, "globex")
        here = auth.authenticate(session, presented, "acme")
    assert (here.org, here.key_org, here.acts_outside) == ("acme", "acme", False)


@pytest.mark.parametrize("role", ["platform", "platform-machine", "operator"])
def test_platform_and_operator_keys_act_in_another_org(store: Store, role: str) -> None:
    presented = key(store, role, org="ops")
    with store.unit(write=False) as session:
        there = auth.authenticate(session, presented, "globex")
        home = auth.authenticate(session, presented)
    assert (there.org, there.key_org, there.acts_outside) == ("globex", "ops", True)
    assert (home.org, home.acts_outside) == ("ops", False)


def test_only_the_platform_role_is_the_platform() -> None:
    assert [r for r in auth.ROLES if auth.Principal("k", "o", r).is_platform] == ["platform"]
    assert [r for r in auth.ROLES if auth.Principal("k", "o", r).runs_platform_tasks] == [
        "platform",
        "platform-machine",
    ]


# -- the interceptor: default deny, and the trail of a call made in another org ---------


class Ctx:
    """The part of a grpc.aio servicer context the interceptor uses."""

    def __init__(self, metadata: dict[str, str]) -> None:
        self._metadata = tuple(metadata.items())
        self.status: grpc.Status | None = None
        self.ran = False

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        raise grpc.aio.AbortError()


def call(store: Store, method: str, presented: str, org: str | None = None) -> Ctx:
    """Call `method` through the interceptor with the service's part of the role table;
    `ctx.ran` says whether the method itself ran, `ctx.status` how the call was refused."""
    service = method.lstrip("/").split("/")[0]
    interceptor = GatewayInterceptor(Authenticator(store), roles.for_service(service))
    details: Any = type("Details", (), {"method": method, "invocation_metadata": ()})()

    async def handler(request: bytes, ctx: Ctx) -> bytes:
        ctx.ran = True
        return b""

    async def go() -> Ctx:
        async def continuation(_: Any) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(handler)

        wrapped = await interceptor.intercept_service(continuation, details)
        assert wrapped is not None
        metadata = {"authorization": f"Bearer {presented}", **({"x-org-id": org} if org else {})}
        ctx = Ctx(metadata)
        with contextlib.suppress(grpc.aio.AbortError):
            await wrapped.unary_unary(b"", ctx)
        return ctx

    return asyncio.run(go())


def trail(store: Store) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    with store.unit(write=False) as session:
        rows = session.scalars(sa.select(audit.AuditEvent).order_by(audit.AuditEvent.id)).all()
        return [(r.name, r.org, r.subject, r.actor, r.details) for r in rows]


def test_a_method_the_table_does_not_name_is_refused(store: Store) -> None:
    ctx = call(store, "/trainyard.job.v1.JobService/NoSuchMethod", key(store, "operator"))
    assert ctx.status is not None and ctx.status.code == grpc.StatusCode.PERMISSION_DENIED
    assert not ctx.ran


def test_a_role_outside_the_methods_set_is_refused(store: Store) -> None:
    ctx = call(store, "/trainyard.job.v1.JobService/CreateJob", key(store, "executor"))
    assert ctx.status is not None and ctx.status.code == grpc.StatusCode.PERMISSION_DENIED
    assert not ctx.ran
    assert call(store, "/trainyard.job.v1.JobService/CreateJob", key(store, "member")).ran


def test_a_call_in_another_org_is_on_the_trail_before_it_runs(store: Store) -> None:
    presented = key(store, "operator", org="ops")
    with store.unit(write=False) as session:
        key_id = auth.authenticate(session, presented).key_id
    assert call(store, "/trainyard.job.v1.JobService/GetJob", presented, "globex").ran
    assert call(store, "/trainyard.job.v1.JobService/GetJob", presented).ran
    refused = call(store, "/trainyard.job.v1.JobService/GetJob", key(store, "admin"), "globex")
    assert refused.status is not None
    assert refused.status.code == grpc.StatusCode.PERMISSION_DENIED
    assert trail(store) == [
        (
            "training.org.acted_in",
            "globex",
            "/trainyard.job.v1.JobService/GetJob",
            key_id,
            {"key_org": "ops", "role": "operator"},
        )
    ]


def test_a_call_in_another_org_that_cannot_be_recorded_is_not_made(store: Store) -> None:
    presented = key(store, "platform", org="platform")
    with store.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE audit_events"))
    ctx = call(store, "/trainyard.artifact.v1.ArtifactService/GrantJobArtifact", presented, "acme")
    assert ctx.status is not None and ctx.status.code == grpc.StatusCode.UNAVAILABLE
    assert not ctx.ran
