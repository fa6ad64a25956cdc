"""Every route and method of the gateway, called with every role: a key is refused
(PERMISSION_DENIED, HTTP 403) exactly where its role may not call, and only platform and
operator keys act in another org, each such call on the audit trail."""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Iterator

import grpc
import httpx
import pytest
import sqlalchemy as sa
from google.api import annotations_pb2

from services.core import audit, auth
from services.core.store import open_store
from tests.support import StackProcess, bearer, reason, service_descriptors

ROLES = ("member", "admin", "executor", "platform-machine", "platform", "operator")

# The model, written out apart from services/core/roles.py so the two are checked
# against each other. A method named nowhere here is an org's user route.
MACHINE = {"Connect", "ClaimTask", "ReportTask", "RegisterTaskArtifact", "ReadTaskInput"}
INTERNAL = {
    "GrantJobArtifact",
    "ConfirmJobArtifact",
    "ReadArtifact",
    "RecordProvenance",
    "EstimatePrice",
    "ListPublished",
}
DEPLOYMENT = {"SweepArtifacts", "SweepStorage", "SetRate", "CreditWallet"}
# An org's administrators cap its spend, keep its keys, read its trail and say where its
# webhooks send its events; the operator may too.
ORG_ADMIN = {
    "SetSpendCap", "CreateKey", "ListKeys", "GetKey", "RevokeKey", "RotateKey",
    "ListAuditEntries", "CreateWebhook", "DeleteWebhook", "RedeliverWebhookDelivery",
}  # fmt: skip


def may_call(role: str, method: str) -> bool:
    if method == "DownloadArtifact":  # a download URL's token is its credential, not a key
        return True
    if method == "GetArtifact":  # also how ClaimService reads a task input's URL
        return role in ("member", "admin", "operator", "platform")
    if method in MACHINE:
        return role in ("executor", "platform-machine", "platform")
    if method in INTERNAL:
        return role == "platform"
    if method in DEPLOYMENT:
        return role == "operator"
    if method in ORG_ADMIN:
        return role in ("admin", "operator")
    return role in ("member", "admin", "operator")


@dataclasses.dataclass(frozen=True)
class Method:
    service: str
    name: str
    client_streaming: bool
    server_streaming: bool
    verb: str  # "" when the method has no REST route
    path: str

    @property
    def grpc_path(self) -> str:
        return f"/{self.service}/{self.name}"


# Well-formed values for path parameters, so a call reaches the service's own checks.
JOB = "job_0123456789abcdef"
SHA256 = "0123456789abcdef" * 4
PARAMS = {"sha256": SHA256, "item": "0"}


def methods() -> list[Method]:
    """Every method of every service, with its REST route from `google.api.http`."""
    found = []
    for service in service_descriptors():
        for method in service.methods:
            options = method.GetOptions()
            verb = path = ""
            if options.HasExtension(annotations_pb2.http):
                rule = options.Extensions[annotations_pb2.http]
                verb = rule.WhichOneof("pattern") or ""
                path = getattr(rule, verb) if verb else ""
                assert not rule.additional_bindings, "walk additional bindings too"
            found.append(
                Method(
                    service.full_name,
                    method.name,
                    method.client_streaming,
                    method.server_streaming,
                    verb,
                    path,
                )
            )
    return found


def fill(path: str) -> str:
    return re.sub(r"\{(\w+)[^}]*\}", lambda m: PARAMS.get(m.group(1), JOB), path)


def key_id(stack: StackProcess, key: str) -> str:
    store = open_store(stack.database_url, run_migrations=False)
    try:
        with store.unit(write=False) as session:
            found = session.scalar(
                sa.select(auth.ApiKey.id).where(auth.ApiKey.key_hash == auth.hash_key(key))
            )
    finally:
        store.dispose()
    assert found
    return found


@pytest.fixture(scope="module")
def org() -> str:
    return f"roles-{secrets.token_hex(4)}"


@pytest.fixture(scope="module")
def keys(stack: StackProcess, org: str) -> dict[str, str]:
    return {role: stack.create_key(org, role) for role in ROLES}


def rest(stack: StackProcess, method: Method, key: str, org: str = "") -> httpx.Response:
    headers = {**bearer(key), **({"x-org-id": org} if org else {})}
    verb = method.verb.upper()
    # A body-less verb sends none; the others send `{}`.
    body: dict[str, object] | None = {} if verb in ("POST", "PUT", "PATCH") else None
    return httpx.request(
        verb, f"{stack.url}{fill(method.path)}", headers=headers, json=body, timeout=60
    )


def grpc_code(channel: grpc.Channel, method: Method, key: str) -> grpc.StatusCode:
    """Call a method with an empty request (an empty message is zero bytes on the wire)."""
    identity = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    metadata = [("authorization", f"Bearer {key}")]

    def empty() -> Iterator[bytes]:
        yield from ()

    try:
        if method.client_streaming and method.server_streaming:
            for _ in channel.stream_stream(method.grpc_path, **identity)(
                empty(), metadata=metadata, timeout=5
            ):
                pass
        elif method.client_streaming:
            channel.stream_unary(method.grpc_path, **identity)(
                empty(), metadata=metadata, timeout=5
            )
        elif method.server_streaming:
            for _ in channel.unary_stream(method.grpc_path, **identity)(
                b"", metadata=metadata, timeout=5
            ):
                pass
        else:
            channel.unary_unary(method.grpc_path, **identity)(b"", metadata=metadata, timeout=5)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[attr-defined, no-any-return]
    return grpc.StatusCode.OK


# Answers that do not come from the method: the key refused, or nothing behind the route.
NOT_THE_METHODS = {
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}


def answered_over_rest(answer: httpx.Response) -> bool:
    """Whether the method itself answered: its success, or its own refusal of the empty
    request as a problem document, never the gateway's or a failure's."""
    if answer.is_success:
        return True
    if answer.status_code >= 500 or answer.status_code in (401, 403):
        return False
    if answer.headers.get("content-type") != "application/problem+json":
        return False
    return reason(answer) not in (
        "unimplemented",
        "unavailable",
        "internal_error",
        "unauthenticated",
    )


def test_the_walk_covers_every_service_and_the_claim_routes() -> None:
    walked = methods()
    packages = {"job", "claim", "artifact", "meter", "client", "webhook", "org"}
    assert {m.service.split(".")[1] for m in walked} == packages
    routed = {"CreateJob", "ClaimTask", "SetRate", "CreateTrainingClient", "CreateWebhook"}
    assert {m.name for m in walked if m.verb} >= routed
    assert {m.name for m in walked if not m.verb} >= {"Connect", "GrantJobArtifact"}


@pytest.mark.parametrize("role", ROLES)
def test_each_rest_route_refuses_exactly_the_roles_that_may_not_call_it(
    stack: StackProcess, keys: dict[str, str], role: str
) -> None:
    wrong = []
    for method in methods():
        if not method.verb:
            continue
        answer = rest(stack, method, keys[role])
        refused = answer.status_code == 403
        if may_call(role, method.name):
            ok = answered_over_rest(answer)
        else:
            ok = refused and reason(answer) == "permission_denied"
        if not ok:
            wrong.append(
                f"{method.verb.upper()} {method.path} ({method.name}): {answer.status_code}"
                f" {answer.text[:120]}"
            )
    assert wrong == [], f"{role}: {wrong}"


@pytest.mark.parametrize("role", ROLES)
def test_each_grpc_method_refuses_exactly_the_roles_that_may_not_call_it(
    stack: StackProcess, keys: dict[str, str], role: str
) -> None:
    wrong = []
    with stack.channel() as channel:
        for method in methods():
            code = grpc_code(channel, method, keys[role])
            if may_call(role, method.name):
                ok = code not in NOT_THE_METHODS
            else:
                ok = code == grpc.StatusCode.PERMISSION_DENIED
            if not ok:
                wrong.append(f"{method.grpc_path}: {code.name}")
    assert wrong == [], f"{role}: {wrong}"


MODELS = Method(
    "trainyard.job.v1.JobService", "ListModels", False, False, "get", "/v1/train/models"
)


@pytest.mark.parametrize("role", ["member", "admin", "executor"])
def test_an_orgs_own_key_may_not_name_another_org(
    stack: StackProcess, keys: dict[str, str], role: str
) -> None:
    answer = rest(stack, MODELS, keys[role], org="other-org")
    assert answer.status_code == 403
    assert reason(answer) == "permission_denied"
    assert b"other-org" not in answer.content


def test_an_operator_acts_in_another_org_on_the_audit_trail(
    stack: StackProcess, keys: dict[str, str], org: str
) -> None:
    target = f"other-{secrets.token_hex(4)}"
    assert rest(stack, MODELS, keys["operator"], org=target).status_code == 200
    store = open_store(stack.database_url, run_migrations=False)
    try:
        with store.unit(write=False) as session:
            rows = session.scalars(
                sa.select(audit.AuditEvent).where(
                    audit.AuditEvent.org == target,
                    audit.AuditEvent.name == "training.org.acted_in",
                )
            ).all()
            found = [(r.subject, r.actor, r.details) for r in rows]
    finally:
        store.dispose()
    assert found == [
        (
            "/trainyard.job.v1.JobService/ListModels",
            key_id(stack, keys["operator"]),
            {"key_org": org, "role": "operator"},
        )
    ]
