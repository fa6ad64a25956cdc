"""Jobs as a user meets them: REST through Envoy, and the CLI, on a stack started the
README's way."""

from __future__ import annotations

import json
import secrets
import string

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core import errors
from tests.support import EXAMPLE, StackProcess, bearer, reason

FIXTURE = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}
# Placed on a machine no executor serves, so the job waits in `preparing` for as long as a test needs.
PARKED = {**FIXTURE, "resources": {"machines": ["nowhere"]}}


def test_create_the_example_body_and_read_it_back(api: httpx.Client) -> None:
    r = api.post("/v1/train/jobs", json=EXAMPLE)
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["id"].startswith("job_") and job["number"] == 1 and job["status"] == "queued"
    assert (job["planned_steps"], job["steps_per_epoch"], job["effective_batch_size"]) == (
        57,
        19,
        8,
    )
    assert (job["train_examples"], job["eval_examples"]) == (148, 12)  # the split by identity
    assert job["adaptation"] == {"mode": "lora", "rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"],
                                 "basis": "", "sources": [], "chose": ""}  # fmt: skip
    assert job["idempotency_key"] == "nightly-42" and job["requested_by"] == "ci"
    assert job["retention"] == {"policy_class": "standard", "ttl_seconds": 604800}
    again = api.post("/v1/train/jobs", json=EXAMPLE).json()
    assert again["id"] == job["id"]
    read = api.get(f"/v1/train/jobs/{job['id']}").json()
    assert read["id"] == job["id"] and read["hyperparameters"]["max_seq_length"] == 512
    by_number = api.get(
        "/v1/train/jobs/1", params={"identifier": "number", "project": "support-bot"}
    )
    assert by_number.json()["id"] == job["id"]


def test_an_unknown_field_is_refused_not_dropped(api: httpx.Client) -> None:
    r = api.post("/v1/train/jobs", json={**FIXTURE, "callback_url": "https://evil.example/hook"})
    assert r.status_code == 400 and reason(r) == "invalid_request"
    # The field is named by its path, its value never.
    assert "evil.example" not in r.text and "Field callback_url " in r.text
    nested = api.post("/v1/train/jobs", json={**FIXTURE, "hyperparameters": {"colour": "blue"}})
    assert nested.status_code == 400 and reason(nested) == "invalid_request"
    assert "hyperparameters.colour" in nested.text and "blue" not in nested.text


def test_a_status_filter_outside_the_statuses_is_refused_with_them(api: httpx.Client) -> None:
    r = api.get("/v1/train/jobs", params={"status": "SUCCEEDED"})
    assert r.status_code == 400 and reason(r) == "invalid_request"
    assert "succeeded" in r.json()["supported"] and "SUCCEEDED" not in r.text


def test_the_same_key_with_another_shape_is_409(api: httpx.Client) -> None:
    api.post("/v1/train/jobs", json={**PARKED, "idempotency_key": "k1"})
    r = api.post(
        "/v1/train/jobs", json={**PARKED, "idempotency_key": "k1", "requested_by": "other"}
    )
    assert r.status_code == 409 and reason(r) == "idempotency_key_reused"


def test_list_pages_with_tokens_and_totals(api: httpx.Client) -> None:
    ids = [api.post("/v1/train/jobs", json=PARKED).json()["id"] for _ in range(3)]
    first = api.get("/v1/train/jobs", params={"page_size": 2}).json()
    assert first["total_size"] == 3 and [j["id"] for j in first["jobs"]] == ids[::-1][:2]
    rest = api.get(
        "/v1/train/jobs", params={"page_size": 2, "page_token": first["next_page_token"]}
    ).json()
    assert [j["id"] for j in rest["jobs"]] == ids[:1] and rest["next_page_token"] == ""
    bad = api.get(
        "/v1/train/jobs", params={"page_token": first["next_page_token"], "status": "failed"}
    )
    assert bad.status_code == 400 and reason(bad) == "invalid_request"


def test_cancel_retry_and_the_event_record(api: httpx.Client) -> None:
    job = api.post("/v1/train/jobs", json=PARKED).json()
    cancelled = api.post(f"/v1/train/jobs/{job['id']}/cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    retry = api.post(
        f"/v1/train/jobs/{job['id']}/retry", json={}, headers={"Idempotency-Key": "r-1"}
    )
    assert retry.status_code == 200, retry.text
    attempt = retry.json()["attempt"]
    assert attempt["attempt_number"] == 2 and attempt["status"] == "queued"
    repeat = api.post(
        f"/v1/train/jobs/{job['id']}/retry", json={}, headers={"Idempotency-Key": "r-1"}
    )
    assert repeat.json()["attempt"]["id"] == attempt["id"]
    attempts = api.get(f"/v1/train/jobs/{job['id']}/attempts").json()["attempts"]
    assert [a["status"] for a in attempts] == ["cancelled", "queued"]
    events = api.get(f"/v1/train/jobs/{job['id']}/events", params={"after": 0, "wait": 1}).json()
    transitions = [e["status"] for e in events["events"] if e["type"] == "transition"]
    assert (
        transitions[0] == "queued"
        and "cancelled" in transitions
        and transitions[-1] in ("queued", "preparing")
    )
    # Counters are JSON numbers, as HIP-1333 writes them.
    assert [e["seq"] for e in events["events"]] == list(range(1, len(events["events"]) + 1))
    assert events["next_after"] == len(events["events"])


def test_watch_streams_newline_delimited_json_until_the_job_ends(api: httpx.Client) -> None:
    job = api.post("/v1/train/jobs", json=PARKED).json()
    api.post(f"/v1/train/jobs/{job['id']}/cancel", json={})
    with api.stream("GET", f"/v1/train/jobs/{job['id']}/watch") as r:
        assert r.status_code == 200
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    assert lines[0]["job"]["id"] == job["id"]
    assert any(line.get("caught_up") for line in lines)
    assert [line["event"]["status"] for line in lines if "event" in line][-1] == "cancelled"


def test_the_snapshot_pages_and_items(api: httpx.Client) -> None:
    job = api.post("/v1/train/jobs", json=PARKED).json()
    for _ in range(100):
        read = api.get(f"/v1/train/jobs/{job['id']}").json()
        if read["preparation"]["status"] == "verified":
            break
    assert (
        read["chat_count"] == 160 and len(read["chats"]) == 50 and read["chats_truncated"] is True
    )
    page = api.get(
        f"/v1/train/jobs/{job['id']}/dataset", params={"offset": 0, "limit": 25, "split": "eval"}
    ).json()
    assert page["total"] == 12 and len(page["items"]) == 12 and page["has_more"] is False
    # The preview answers each example's messages (the job's `chats` too), not just a count.
    assert [m["role"] for m in page["items"][0]["messages"]] == ["user", "assistant"]
    assert read["chats"][0]["messages"][0]["content"].startswith("Reverse:")
    searched = api.get(f"/v1/train/jobs/{job['id']}/dataset", params={"search": "upper"}).json()
    assert searched["search_applied"] is True and searched["total"] is None
    item = api.get(f"/v1/train/jobs/{job['id']}/dataset/{searched['items'][0]['id']}").json()
    assert item["messages"][0]["content"].startswith("Uppercase:")
    too_many = api.get(f"/v1/train/jobs/{job['id']}/dataset", params={"limit": 500}).json()
    assert too_many["limit"] == 200


def test_estimate_answers_the_plan_and_the_duration_admission(api: httpx.Client) -> None:
    r = api.post("/v1/train/estimate", json={**FIXTURE, "hyperparameters": {"max_steps": 10}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["job"]["planned_steps"] == 10 and body["admitted"] is True
    assert body["duration_components"]["execution_limit_seconds"] == 21600
    assert body["duration_components"]["post_processing_tolerance_seconds"] == 1800
    assert body["dataset"]["selected_chats"] == 160 and body["dataset"]["is_trainable"] is True


def test_another_orgs_job_is_404(api: httpx.Client, stack: StackProcess, member_key: str) -> None:
    job = api.post("/v1/train/jobs", json=PARKED).json()
    r = httpx.get(f"{stack.url}/v1/train/jobs/{job['id']}", headers=bearer(member_key))
    assert r.status_code == 404 and reason(r) == "not_found"


# -- a thousand bad bodies ---------------------------------------------------------------------

marker = st.text(
    alphabet=string.ascii_letters + string.digits + "/:.$`;-_ ", min_size=4, max_size=24
).map(lambda s: "Qx7" + s)
bad_value = (
    marker
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.lists(marker, min_size=1, max_size=3)
)
# Fields where no marker-bearing value is valid.
BAD_FIELDS = [
    ("base_model",), ("dataset", "uri"), ("adaptation", "mode"), ("objective", "loss_mask"),
    ("output", "kind"), ("retention", "policy_class"), ("hyperparameters", "learning_rate"),
    ("hyperparameters", "max_steps"), ("resources", "devices"), ("dataset", "tags"), ("revision",),
]  # fmt: skip


def _with(path: tuple[str, ...], value: object) -> dict:  # type: ignore[type-arg]
    body = json.loads(json.dumps(FIXTURE))
    holder = body
    for part in path[:-1]:
        holder = holder.setdefault(part, {})
    holder[path[-1]] = value
    return body


bad_bodies = st.one_of(
    # No number: a number may be a valid learning rate or step count.
    st.builds(_with, st.sampled_from(BAD_FIELDS), marker | st.lists(marker, min_size=1, max_size=3)),
    st.builds(lambda k, v: {**FIXTURE, k: v}, marker, bad_value),
    st.builds(lambda k, v: {**FIXTURE, "hyperparameters": {k: v}}, marker, bad_value),
    st.dictionaries(marker, bad_value, min_size=1, max_size=3),
    st.builds(lambda v: {**FIXTURE, "dataset": {"uri": "fixture:synthetic-tiny-v1", "system_prompt": v}},
              marker.map(lambda m: f"see http://{m}")),
)  # fmt: skip


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bad_bodies)
def test_a_thousand_bad_bodies_each_get_a_stable_reason_and_echo_nothing(
    api: httpx.Client, body: dict
) -> None:  # type: ignore[type-arg]
    r = api.post("/v1/train/jobs", json=body)
    assert 400 <= r.status_code < 500, r.text
    assert reason(r).upper() in errors.REASONS
    for sent in _strings(body):
        if sent.startswith("Qx7"):
            assert sent not in r.text


# -- the CLI -----------------------------------------------------------------------------------


def test_the_cli_creates_lists_cancels_watches_and_retries(stack: StackProcess) -> None:
    key = stack.create_key(f"cli-{secrets.token_hex(3)}", "member")

    def cli(*args: str) -> str:
        return stack.cli(*args, key=key).stdout

    spec = stack.home.parent / "parked.json"
    spec.write_text(json.dumps(PARKED))
    job = json.loads(cli("jobs", "create", "-f", str(spec), "--max-steps", "5"))
    assert job["planned_steps"] == 5
    assert job["id"] in cli("jobs", "list")
    assert json.loads(cli("jobs", "get", "1", "--number"))["id"] == job["id"]
    assert "cancelled" in cli("jobs", "cancel", job["id"])
    watched = cli("jobs", "watch", job["id"])
    assert f"{job['id']} cancelled" in watched and "model_available false" in watched
    assert "attempt 2" in cli("jobs", "retry", job["id"], "--key", "cli-retry")
    refused = stack.cli("jobs", "get", "job_0000000000000000", check=False, key=key)
    assert refused.returncode == 1 and "NOT_FOUND" in refused.stderr
