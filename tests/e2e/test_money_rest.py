"""Money over REST through the gateway, as HIP-1333 §3 and §10 write it: the rates with
their floors, an org's wallet with its free credit, an operator's credit applied once per
name, the ledger's pages, caps, a job that needs a budget and a payer, refused with the
money wire's body, and a job charged exactly what its holds metered."""

from __future__ import annotations

import secrets

import httpx
import pytest

from tests.support import StackProcess, bearer, reason, wait_for_job

JOB = {
    "base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "hyperparameters": {"max_steps": 3}, "resources": {"budget": 100},
}  # fmt: skip


@pytest.fixture
def org(stack: StackProcess) -> tuple[str, httpx.Client, httpx.Client]:
    """A fresh org's member and an operator acting in it."""
    name = f"money-{secrets.token_hex(3)}"
    member = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(name)), timeout=60)
    operator = httpx.Client(
        base_url=stack.url,
        headers={**bearer(stack.create_key("ops", "operator")), "x-org-id": name},
        timeout=60,
    )
    return name, member, operator


def test_rates_answer_every_meter_with_its_floor_and_an_operator_sets_one(
    org: tuple[str, httpx.Client, httpx.Client],
) -> None:
    _, member, operator = org
    found = {r["meter"]: r for r in member.get("/v1/train/rates").json()["rates"]}
    assert found["fixture-tiny-llm-gpu-hour"] == {
        "meter": "fixture-tiny-llm-gpu-hour", "micro_cents": 348000000, "unit": "device-hour",
        "floor": True,
    }  # fmt: skip
    assert found["fixture-tiny-llm-cpu-hour"]["micro_cents"] == 8000000
    assert found["storage-gb-month"]["unit"] == "gb-month"
    assert found["client-second"]["micro_cents"] == 5000
    refused = member.post("/v1/train/rates", json={"meter": "client-second", "micro_cents": 1})
    assert refused.status_code == 403 and reason(refused) == "permission_denied"
    unknown = operator.post("/v1/train/rates", json={"meter": "Qz-hour", "micro_cents": 1})
    assert unknown.status_code == 400 and "Qz" not in unknown.text
    assert "supported" in unknown.json()


def test_an_operator_sets_a_rate_every_org_then_reads(
    org: tuple[str, httpx.Client, httpx.Client],
) -> None:
    _, member, operator = org

    def storage() -> dict[str, object]:
        rates = member.get("/v1/train/rates").json()["rates"]
        (rate,) = [r for r in rates if r["meter"] == "storage-gb-month"]
        return rate  # type: ignore[no-any-return]

    before = storage()["micro_cents"]
    raised = {"meter": "storage-gb-month", "micro_cents": int(before) + 1}
    # The stack is shared: the rate goes back to what it was, whatever is asserted.
    try:
        answer = operator.post("/v1/train/rates", json=raised)
        assert answer.status_code == 200, answer.text
        # Every org reads the rate set, no longer the compiled floor.
        assert answer.json() == storage() == {**raised, "unit": "gb-month", "floor": False}
    finally:
        operator.post("/v1/train/rates", json={**raised, "micro_cents": before})
    assert storage()["micro_cents"] == before


def test_a_new_org_holds_its_free_credit_and_an_operator_credit_applies_once(
    org: tuple[str, httpx.Client, httpx.Client],
) -> None:
    name, member, operator = org
    wallet = member.get("/v1/train/wallet").json()
    assert wallet["payer"] == name and wallet["balance_micro_cents"] == 1000 * 10**6
    for _ in range(3):  # a repeat with the same name is one credit
        credited = operator.post(
            "/v1/train/wallet/credit",
            json={"payer": name, "micro_cents": 5 * 10**6, "name": "inv-1"},
        )
        assert credited.status_code == 200
    assert credited.json()["balance_micro_cents"] == 1005 * 10**6
    entries = member.get("/v1/train/ledger", params={"page_size": 1}).json()
    assert [e["name"] for e in entries["entries"]] == ["credit/inv-1"]
    rest = member.get(
        "/v1/train/ledger", params={"page_size": 1, "page_token": entries["next_page_token"]}
    ).json()
    assert [e["name"] for e in rest["entries"]] == ["credit/free"] and not rest.get(
        "next_page_token"
    )
    refused = member.post("/v1/train/wallet/credit", json={"micro_cents": 1, "name": "x"})
    assert refused.status_code == 403


def test_a_platform_job_needs_a_budget_and_a_payer_that_holds_its_first_window(
    org: tuple[str, httpx.Client, httpx.Client], stack: StackProcess
) -> None:
    name, member, _ = org
    unbudgeted = member.post(
        "/v1/train/jobs", json={k: v for k, v in JOB.items() if k != "resources"}
    )
    assert unbudgeted.status_code == 400 and reason(unbudgeted) == "budget_required"
    # A spend cap below one GPU window (300 s at $3.48 an hour: 29 cents).
    admin = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(name, "admin")))
    capped = admin.post("/v1/train/wallet/caps", json={"micro_cents": 10**6})
    assert capped.status_code == 200 and capped.json()["spend_cap_micro_cents"] == 1000000
    refused = member.post("/v1/train/jobs", json=JOB)
    assert refused.status_code == 402
    assert refused.json() == {
        "error": {"code": "spend_cap_exceeded", "message": refused.json()["error"]["message"]}
    }
    admin.post("/v1/train/wallet/caps", json={"micro_cents": 0})
    # Another org's wallet is never visible: each reads its own.
    other = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(f"{name}-x")))
    assert other.get("/v1/train/wallet").json()["payer"] == f"{name}-x"


def test_a_job_is_charged_what_its_holds_metered_and_the_estimate_prices_it(
    api: httpx.Client,
) -> None:
    estimate = api.post("/v1/train/estimate", json=JOB).json()
    expected, ceiling = estimate["expected"], estimate["authorization_ceiling"]
    # The stack's only executor trains on CPU: priced at the CPU rate, and the ceiling is
    # admission's projection (with `002_…`'s tolerance) with its margin.
    assert estimate["device_class"] == "cpu"
    assert expected["micro_cents"] == int(expected["device_seconds"]) * 8_000_000 // 3600
    projected = estimate["duration_components"]["projected_active_seconds"]
    assert ceiling["device_seconds"] == pytest.approx(projected * 1.25, abs=1)
    assert ceiling["micro_cents"] == int(ceiling["device_seconds"]) * 8_000_000 // 3600
    job = api.post("/v1/train/jobs", json=JOB).json()
    ended = ("succeeded", "failed", "stopped", "cancelled")
    done = wait_for_job(api, job["id"], lambda j: j["status"] in ended)
    assert done["status"] == "succeeded"
    metered = done["timing"]["metered_device_seconds"]
    # The local executor trains on CPU: 8 cents a device-hour, charged by the clock.
    assert done["timing"]["charged_device_seconds"] == metered
    assert done["cost_micro_cents"] == metered * 8_000_000 // 3600
    # The cost reads in the budget's unit, US cents: the two compare directly.
    assert done["cost_credits"] == pytest.approx(done["cost_micro_cents"] / 10**6)
    assert done["cost_credits"] <= done["resources"]["budget"]
    assert "holding" not in done or done["holding"] == {}
    wallet = api.get("/v1/train/wallet").json()
    assert wallet.get("holds", []) == []
    charged = [e for e in api.get("/v1/train/ledger").json()["entries"] if e["kind"] == "compute"]
    assert sum(-e["micro_cents"] for e in charged) == done["cost_micro_cents"]
    assert {e["job_id"] for e in charged} <= {job["id"]}


def test_the_cli_shows_the_wallet_credits_once_and_asks_before_spending(
    stack: StackProcess,
) -> None:
    org = f"cli-money-{secrets.token_hex(3)}"
    key = stack.create_key(org)
    for _ in range(2):
        credited = stack.cli("admin", "credit", "--org", org, "--amount", "2.50", "--name", "inv-9")
    assert credited.stdout.startswith("already credited; balance $12.5000")
    wallet = stack.cli("wallet", key=key).stdout
    assert "balance    $12.5000" in wallet and "cap none" in wallet
    ledger = stack.cli("ledger", key=key).stdout.splitlines()
    assert [line.split()[-1] for line in ledger] == ["credit/inv-9", "credit/free"]
    # Without --yes and nobody to answer, the job is not created.
    asked = stack.cli("jobs", "create", "--fixture", "--max-steps", "1", check=False, key=key)
    assert asked.returncode != 0 and "expected $" in asked.stderr and "Create it?" in asked.stderr
    assert stack.cli("jobs", "list", key=key).stdout == ""
    created = stack.cli("jobs", "create", "--fixture", "--max-steps", "1", "--yes", key=key)
    assert '"cost_credits"' not in created.stdout or '"cost_credits": "0"' in created.stdout
    assert len(stack.cli("jobs", "list", key=key).stdout.splitlines()) == 1
