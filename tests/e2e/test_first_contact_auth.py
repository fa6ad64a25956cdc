"""First contact, round two (issue 27): a refused credential says which problem it has and
where a key comes from, a role refusal names the roles that may call, and a REST body is
read as RFC 8259 JSON only, refused at its first fault's line and column."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from playwright.sync_api import Page, expect

from services.core import auth
from services.core.store import open_store
from tests.e2e.test_console import browser, page, screenshot  # noqa: F401 (fixtures)
from tests.support import StackProcess, bearer, reason
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

WHERE = "trainyard admin create-key --org <org> --role <role>"
# A key of the right shape this deployment never made.
STRANGER = "ty_" + "A" * 43


def revoked_key(stack: StackProcess) -> str:
    """A key made and then revoked with `trainyard admin revoke-key`, never used before."""
    key = stack.create_key(f"org-{secrets.token_hex(4)}")
    store = open_store(stack.database_url, run_migrations=False)
    try:
        with store.unit(write=False) as session:
            key_id = session.query(auth.ApiKey).filter_by(key_hash=auth.hash_key(key)).one().id
    finally:
        store.dispose()
    assert stack.cli("admin", "revoke-key", key_id).stdout == "revoked\n"
    return key


def grpc_refusal(
    stack: StackProcess, metadata: list[tuple[str, str]]
) -> tuple[grpc.StatusCode, dict[str, str]]:
    with stack.channel() as channel, pytest.raises(grpc.RpcError) as caught:
        job_service_pb2_grpc.JobServiceStub(channel).ListModels(
            job_service_pb2.ListModelsRequest(), metadata=metadata, timeout=30
        )
    status = rpc_status.from_call(caught.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return caught.value.code(), {"reason": info.reason, "message": status.message, **info.metadata}


# -- issue 27 item 4: auth errors say what to do ---------------------------------------------

CASES: list[tuple[str, Callable[[StackProcess], dict[str, str]]]] = [
    ("missing", lambda stack: {}),
    ("malformed", lambda stack: {"authorization": stack.create_key("auth-x")}),  # no `Bearer `
    ("malformed", lambda stack: bearer("not-a-key")),
    ("unknown", lambda stack: bearer(STRANGER)),
    ("revoked", lambda stack: bearer(revoked_key(stack))),
]


@pytest.mark.parametrize(("problem", "headers"), CASES)
def test_a_refused_credential_over_rest_says_which_problem_and_where_keys_come_from(
    each_stack: StackProcess, problem: str, headers: Callable[[StackProcess], dict[str, str]]
) -> None:
    sent = headers(each_stack)
    answer = httpx.get(f"{each_stack.url}/v1/train/models", headers=sent, timeout=30)
    assert answer.status_code == 401 and reason(answer) == "unauthenticated"
    body = answer.json()
    assert body["metadata"] == {"problem": problem}
    assert body["detail"] == auth.PROBLEMS[problem] and WHERE in body["detail"]
    for value in sent.values():
        assert value.removeprefix("Bearer ") not in answer.text


@pytest.mark.parametrize(("problem", "headers"), CASES)
def test_a_refused_credential_over_grpc_says_which_problem_and_where_keys_come_from(
    stack: StackProcess, problem: str, headers: Callable[[StackProcess], dict[str, str]]
) -> None:
    code, said = grpc_refusal(stack, list(headers(stack).items()))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert said == {"reason": "UNAUTHENTICATED", "message": auth.PROBLEMS[problem],
                    "problem": problem}  # fmt: skip


def test_a_role_refusal_names_the_roles_that_may_call_and_never_the_key(
    stack: StackProcess,
) -> None:
    key = stack.create_key("auth-roles", "executor")
    answer = httpx.get(f"{stack.url}/v1/train/models", headers=bearer(key), timeout=30)
    assert answer.status_code == 403 and reason(answer) == "permission_denied"
    assert answer.json()["metadata"] == {"roles": "admin,member,operator"}
    assert key not in answer.text and "executor" not in answer.text
    code, said = grpc_refusal(stack, list(bearer(key).items()))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert said["roles"] == "admin,member,operator" and key not in said["message"]


def test_the_console_sign_in_says_where_a_key_comes_from(
    stack: StackProcess,
    page: Page,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    page.goto(f"{stack.url}/console/")
    source = page.locator("#key-source")
    expect(source).to_have_text(
        "No key yet? The deployment's operator makes one for your org with "
        "trainyard admin create-key --org <org> --role member."
    )
    expect(source.locator("code")).to_be_visible()
    screenshot(page, tmp_path, "console-sign-in.png")


# -- issue 27 item 5: JSON is parsed strictly ------------------------------------------------

# Placed on a machine no executor serves: a job that was created would wait, and be listed.
PARKED = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "hyperparameters": {"max_steps": 5},
    "resources": {"machines": ["nowhere"]},
}
GOOD = json.dumps(PARKED, indent=2)
# Each body's fault, and where it is (line, column): RFC 8259 JSON only, and a key once in an
# object (the RFC leaves a repeated key's meaning to the reader; a request means one thing).
BROKEN = {
    "trailing comma": (GOOD[:-2] + ",\n}", "a trailing comma is not JSON", (14, 1)),
    "single quotes": (GOOD.replace('"base_model"', "'base_model'"),
                      "strings and keys take double quotes, not single ones", (2, 3)),
    "missing brace": (GOOD[:-2], "the body ends before its value does", (13, 4)),
    "NaN": (GOOD.replace('"max_steps": 5', '"max_steps": NaN'),
            "NaN and Infinity are not JSON numbers", (7, 18)),
    "Infinity": (GOOD.replace('"max_steps": 5', '"max_steps": Infinity'),
                 "NaN and Infinity are not JSON numbers", (7, 18)),
    "comment": (GOOD.replace("{\n", "{\n  // parked\n", 1), "comments are not JSON", (2, 3)),
    "duplicate key": (GOOD.replace('"base_model"', '"base_model": "x",\n  "base_model"'),
                      "a key appears twice in one object", (3, 3)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_body_that_is_not_strict_json_is_refused_at_its_fault_and_creates_nothing(
    each_stack: StackProcess, case: str
) -> None:
    text, words, (line, column) = BROKEN[case]
    with each_stack.member_client() as api:
        answer = api.post(
            "/v1/train/jobs", content=text, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 400 and reason(answer) == "malformed_json", answer.text
        body = answer.json()
        assert body["detail"] == (
            f"The request body is not JSON (RFC 8259): {words}, at line {line}, column {column}."
        )
        assert (body["metadata"]["line"], body["metadata"]["column"]) == (str(line), str(column))
        assert api.get("/v1/train/jobs").json().get("jobs", []) == []
        # The same request written as JSON is created: the refusal was the syntax's alone.
        created = api.post(
            "/v1/train/jobs", content=GOOD, headers={"content-type": "application/json"}
        )
        assert created.status_code == 200, created.text
