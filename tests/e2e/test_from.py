"""A job `from` an adapter over REST, on the README's stack: a training client saves an
adapter of the org, a LoRA job names it as `from` and trains on from it to success, the
adapter is `409 IN_USE` while the job has not ended, and a `from` that is not an adapter
of the job's LoRA is refused by name without echoing it."""

from __future__ import annotations

import secrets

import httpx
import pytest

from tests.support import StackProcess, bearer, reason, wait_for_job

BASE = "fixture-tiny-llm"
TEXT = "the quick brown fox jumps over the lazy dog. "


@pytest.fixture
def member(stack: StackProcess) -> tuple[httpx.Client, httpx.Client]:
    """An org's member, and its operator who creates clients."""
    org = f"org-{secrets.token_hex(4)}"
    member = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(org)), timeout=150)
    operator = httpx.Client(
        base_url=stack.url,
        headers={**bearer(stack.create_key("ops", "operator")), "x-org-id": org},
        timeout=150,
    )
    return member, operator


def saved_adapter(member: httpx.Client, operator: httpx.Client) -> str:
    r = operator.post(
        "/v1/train/clients",
        json={"base_model": BASE, "adaptation": {"rank": 4, "alpha": 8, "targets": ["q_proj"]}},
    )
    assert r.status_code == 200, r.text
    cid = r.json()["id"]
    try:
        for kind, body in (
            ("forward_backward", {"data": [{"model_input": {"text": TEXT}}], "loss_fn": "cross_entropy"}),
            ("optim_step", {}),
            ("save_weights", {"name": "start"}),
        ):  # fmt: skip
            r = member.post(f"/v1/train/clients/{cid}/{kind}", json=body)
            assert r.status_code == 200 and r.json()["status"] == "done", r.text
        return str(r.json()["save_weights"]["sha256"])
    finally:
        member.delete(f"/v1/train/clients/{cid}")


def test_a_job_from_a_clients_adapter_trains_on_from_it_and_holds_it(
    member: tuple[httpx.Client, httpx.Client],
) -> None:
    api, operator = member
    sha = saved_adapter(api, operator)
    job = {
        "base_model": BASE,
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "resources": {"budget": 100},
        "hyperparameters": {"max_steps": 4},
        "from": sha,
    }
    r = api.post("/v1/train/jobs", json=job)
    assert r.status_code == 200, r.text
    created = r.json()
    assert created["from"] == sha
    assert created["adaptation"]["mode"] == "lora"
    assert (created["adaptation"]["rank"], created["adaptation"]["alpha"]) == (4, 8)
    assert created["adaptation"]["targets"] == ["q_proj"]
    busy = api.delete(f"/v1/train/artifacts/{sha}")
    assert busy.status_code == 409 and reason(busy) == "in_use"
    done = wait_for_job(api, created["id"], lambda j: j["status"] in ("succeeded", "failed"))
    assert done["status"] == "succeeded", done.get("failure_code")
    gone = api.delete(f"/v1/train/artifacts/{sha}")
    assert gone.status_code == 200, gone.text


def test_a_from_that_is_no_adapter_for_the_job_is_refused_by_name(
    member: tuple[httpx.Client, httpx.Client],
) -> None:
    api, operator = member
    base = {
        "base_model": BASE,
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "resources": {"budget": 100},
    }
    unknown = "ab" * 32
    r = api.post("/v1/train/jobs", json={**base, "from": unknown})
    assert r.status_code == 400 and reason(r) == "invalid_request"
    assert unknown not in r.text and "from" in r.text
    sha = saved_adapter(api, operator)
    r = api.post("/v1/train/jobs", json={**base, "from": sha, "adaptation": {"rank": 8}})
    assert r.status_code == 400 and reason(r) == "incompatible_adapters"
    r = api.post("/v1/train/jobs", json={**base, "from": sha, "adaptation": {"mode": "full"}})
    assert r.status_code == 400 and reason(r) == "invalid_request"
    r = api.post("/v1/train/jobs", json={"base_model": BASE, "from": sha})
    assert r.status_code == 400 and reason(r) == "invalid_request" and "dataset.uri" in r.text
