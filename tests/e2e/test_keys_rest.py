"""Keys a team hands out, its audit trail and its limits, as a user meets them through the
gateway on SQLite and PostgreSQL (issue 30 items 4-6): an org's admin makes a key limited
to a project, a base and a monthly spend, which is refused outside each and works inside;
keys are listed without their secrets; a revoked key is refused by the very next call, a
rotated one's old secret too, an expired one as expired; the trail is read and filtered
over REST and the CLI, an operator reading another org's; the limits answer real use."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator

import httpx
import pytest

from tests.support import StackProcess, bearer, eventually, reason

# A job that trains little if it runs at all: the tests cancel what they make.
JOB = {
    "base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "hyperparameters": {"max_steps": 2},
}  # fmt: skip


class Org:
    """A fresh org with an admin's REST client, as `trainyard admin create-key` makes it."""

    def __init__(self, stack: StackProcess) -> None:
        self.stack = stack
        self.name = f"keys-{secrets.token_hex(3)}"
        self.admin_key = stack.create_key(self.name, "admin")
        self.admin = self.client(self.admin_key)

    def client(self, key: str, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.stack.url, headers={**bearer(key), **headers}, timeout=60)

    def make(self, **body: object) -> dict[str, object]:
        made = self.admin.post("/v1/train/keys", json={"role": "member", **body})
        assert made.status_code == 200, made.text
        return made.json()  # type: ignore[no-any-return]


@pytest.fixture
def org(each_stack: StackProcess) -> Iterator[Org]:
    made = Org(each_stack)
    try:
        yield made
    finally:
        made.admin.close()


def problem(answer: httpx.Response) -> str:
    assert answer.status_code == 401 and reason(answer) == "unauthenticated", answer.text
    return str(answer.json()["metadata"]["problem"])


def test_a_key_limited_to_a_project_a_base_and_a_spend_is_refused_outside_each(org: Org) -> None:
    made = org.make(label="ci", projects=["bots"], bases=["fixture-tiny-llm"], monthly_spend_cap=10)
    assert made["secret"].startswith("ty_") and made["status"] == "active"  # type: ignore[union-attr]
    assert (made["projects"], made["bases"], made["monthly_spend_cap"]) == (
        ["bots"], ["fixture-tiny-llm"], 10,
    )  # fmt: skip
    assert made["expire_time"] is None and made["spend_this_month"] == 0
    key = org.client(str(made["secret"]))

    other_project = key.post(
        "/v1/train/jobs", json={**JOB, "project": "web", "resources": {"budget": 5}}
    )
    assert other_project.status_code == 403 and reason(other_project) == "permission_denied"
    assert other_project.json()["fields"] == ["project"]
    other_base = key.post(
        "/v1/train/estimate",
        json={"project": "bots", "base_model": "fixture-tiny-decider",
              "dataset": {"uri": "fixture:decisions-tiny-v1"}, "resources": {"budget": 5}},
    )  # fmt: skip
    assert other_base.status_code == 403 and other_base.json()["fields"] == ["base_model"]
    # A first window of 100 cents' budget would take the key past its 10 cents.
    past = key.post("/v1/train/jobs", json={**JOB, "project": "bots", "resources": {"budget": 100}})
    assert past.status_code == 402, past.text
    assert past.json()["error"]["code"] == "spend_cap_exceeded"
    assert "API key" in past.json()["error"]["message"]

    inside = key.post("/v1/train/jobs", json={**JOB, "project": "bots", "resources": {"budget": 5}})
    assert inside.status_code == 200, inside.text
    job = inside.json()
    assert job["key_id"] == made["id"]
    # The admin's job in another project answers the key as an unknown one.
    theirs = org.admin.post(
        "/v1/train/jobs", json={**JOB, "project": "web", "resources": {"budget": 5}}
    )
    assert theirs.status_code == 200, theirs.text
    for path in (
        f"/v1/train/jobs/{theirs.json()['id']}",
        f"/v1/train/jobs/{theirs.json()['id']}/events",
    ):
        assert key.get(path).status_code == 404
    assert key.post(f"/v1/train/jobs/{theirs.json()['id']}/cancel", json={}).status_code == 404
    listed = key.get("/v1/train/jobs").json()
    assert [j["id"] for j in listed["jobs"]] == [job["id"]] and listed["total_size"] == 1
    for made_job in (job, theirs.json()):
        org.admin.post(f"/v1/train/jobs/{made_job['id']}/cancel", json={})

    # Listed, never with a secret or its hash; a member may not list keys.
    keys = org.admin.get("/v1/train/keys").json()
    assert {k["id"] for k in keys["keys"]} >= {made["id"]} and keys["total_size"] == 2
    assert str(made["secret"]) not in json.dumps(keys) and all(
        "secret" not in k for k in keys["keys"]
    )
    assert hashlib.sha256(str(made["secret"]).encode()).hexdigest() not in json.dumps(keys)
    one = org.admin.get(f"/v1/train/keys/{made['id']}").json()
    assert {*one} >= {"id", "org", "role", "label", "projects", "bases", "monthly_spend_cap",
                      "spend_this_month", "expire_time", "create_time", "revoke_time",
                      "last_used_time", "status"} and "secret" not in one  # fmt: skip
    # Its calls above are noted as its last use (written beside the call, not in its way).
    eventually(
        lambda: org.admin.get(f"/v1/train/keys/{made['id']}").json()["last_used_time"],
        lambda used: used is not None,
        "the key's last use",
    )
    assert key.get("/v1/train/keys").status_code == 403
    # An admin hands out no deployment role.
    operator = org.admin.post("/v1/train/keys", json={"role": "operator"})
    assert operator.status_code == 403 and operator.json()["fields"] == ["role"]


def test_revoked_rotated_and_expired_keys_are_refused_at_once(org: Org) -> None:
    made = org.make(label="rotating")
    old = org.client(str(made["secret"]))
    assert old.get("/v1/train/models").status_code == 200
    rotated = org.admin.post(f"/v1/train/keys/{made['id']}/rotate", json={}).json()
    assert rotated["id"] == made["id"] and rotated["secret"] != made["secret"]
    assert problem(old.get("/v1/train/models")) == "rotated"
    new = org.client(str(rotated["secret"]))
    assert new.get("/v1/train/models").status_code == 200
    assert new.get("/v1/train/wallet").status_code == 200  # through another service too
    revoked = org.admin.post(f"/v1/train/keys/{made['id']}/revoke", json={})
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    # The very next call, to any service, with no wait between.
    assert problem(new.get("/v1/train/models")) == "revoked"
    assert problem(new.get("/v1/train/wallet")) == "revoked"
    assert problem(new.get("/v1/train/artifacts")) == "revoked"
    listed = {k["id"]: k["status"] for k in org.admin.get("/v1/train/keys").json()["keys"]}
    assert listed[str(made["id"])] == "revoked"

    short = org.client(str(org.make(ttl_seconds=1)["secret"]))
    eventually(
        lambda: short.get("/v1/train/models"),
        lambda answer: answer.status_code == 401,
        "a key past its ttl",
        timeout=15,
    )
    assert problem(short.get("/v1/train/models")) == "expired"


def test_the_trail_is_read_filtered_over_rest_and_the_cli_and_by_an_operator(org: Org) -> None:
    made = org.make(label="audited")
    org.admin.post(f"/v1/train/keys/{made['id']}/rotate", json={})
    org.admin.post(f"/v1/train/keys/{made['id']}/revoke", json={})
    admin_id = org.admin.get("/v1/train/limits").json()["key"]["id"]

    keys = org.admin.get("/v1/train/audit", params={"action": "training.key.*"}).json()
    assert [e["action"] for e in keys["entries"]] == [
        "training.key.revoked", "training.key.rotated", "training.key.created",
    ]  # fmt: skip
    first = keys["entries"][0]
    assert (first["subject"], first["key_id"], first["key_role"], first["org"], first["key_org"]) == (
        made["id"], admin_id, "admin", org.name, org.name,
    )  # fmt: skip
    assert first["request_id"] and first["create_time"].endswith("Z")
    paged = org.admin.get(
        "/v1/train/audit", params={"action": "training.key.*", "page_size": 2}
    ).json()
    assert len(paged["entries"]) == 2 and paged["next_page_token"]
    rest = org.admin.get(
        "/v1/train/audit",
        params={"action": "training.key.*", "page_size": 2, "page_token": paged["next_page_token"]},
    ).json()
    assert [e["action"] for e in rest["entries"]] == ["training.key.created"]
    later = org.admin.get("/v1/train/audit", params={"start_time": "2999-01-01T00:00:00Z"}).json()
    assert later["entries"] == []
    bad = org.admin.get("/v1/train/audit", params={"start_time": "last tuesday"})
    assert bad.status_code == 400 and bad.json()["fields"] == ["start_time"]
    assert "tuesday" not in bad.text
    member = org.client(org.stack.create_key(org.name, "member"))
    assert member.get("/v1/train/audit").status_code == 403

    # The operator reads the org's trail; its own reading is on it, from its own org.
    operator_key = org.stack.create_key("ops", "operator")
    operator = org.client(operator_key, **{"x-org-id": org.name})
    seen = operator.get("/v1/train/audit", params={"page_size": 5}).json()["entries"]
    assert seen[0]["action"] == "training.org.acted_in"
    assert (seen[0]["org"], seen[0]["key_org"], seen[0]["key_role"]) == (
        org.name,
        "ops",
        "operator",
    )
    assert any(e["action"] == "training.key.revoked" for e in seen)

    cli = org.stack.cli("audit", "--action", "training.key.*", "--limit", "2", key=org.admin_key)
    lines = cli.stdout.splitlines()
    assert len(lines) == 2 and "training.key.revoked" in lines[0] and admin_id in lines[0]
    assert "training.key.rotated" in lines[1]
    by_operator = org.stack.cli(
        "--org", org.name, "audit", "--actor", admin_id, "--since", "1h", key=operator_key
    )
    assert "training.key.created" in by_operator.stdout
    refused = org.stack.cli("audit", key=org.stack.create_key(org.name, "member"), check=False)
    assert refused.returncode == 1 and "permission_denied" in refused.stderr.lower()


def test_the_limits_answer_real_use_and_the_cli_manages_keys(org: Org) -> None:
    payload = b'{"messages": [{"role": "user", "content": "hi"}]}\n'
    granted = org.admin.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows.jsonl",
              "sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)},
    )  # fmt: skip
    assert granted.status_code == 200, granted.text
    limits = org.admin.get("/v1/train/limits").json()
    assert limits["pending_uploads"]["used"] == len(payload)
    assert limits["pending_uploads"]["limit"] == 128 * 1024**3
    assert limits["active_jobs"] == {"used": 0, "limit": 64}
    assert limits["training_clients"]["used"] == 0
    assert limits["spend_this_month"] == {"used": 0, "limit": None}
    assert limits["key"]["role"] == "admin" and "secret" not in limits["key"]

    made = org.stack.cli(
        "admin", "keys", "create", "--role", "member", "--project", "bots",
        "--monthly-spend-cap", "25", "--secret-only", key=org.admin_key,
    )  # fmt: skip
    secret = made.stdout.strip()
    assert secret.startswith("ty_") and "not shown again" in made.stderr
    mine = org.client(secret).get("/v1/train/limits").json()["key"]
    assert (mine["projects"], mine["monthly_spend_cap"]) == (["bots"], 25)
    listed = org.stack.cli("admin", "keys", "list", key=org.admin_key).stdout
    assert mine["id"] in listed and "projects bots" in listed and secret not in listed
    shown = org.stack.cli("limits", key=secret).stdout
    assert "pending uploads" in shown and f"{len(payload)} bytes" in shown and mine["id"] in shown
    rotated = org.stack.cli(
        "admin", "keys", "rotate", mine["id"], "--secret-only", key=org.admin_key
    )
    assert problem(org.client(secret).get("/v1/train/models")) == "rotated"
    org.stack.cli("admin", "keys", "revoke", mine["id"], key=org.admin_key)
    assert problem(org.client(rotated.stdout.strip()).get("/v1/train/models")) == "revoked"
