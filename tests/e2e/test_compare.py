"""Comparing runs as a user meets it: three tiny jobs that differ in learning rate and
LoRA rank, picked on the console's jobs list and compared in chromium (three curves, the
x axis by step or by tokens seen, the evaluation columns, only the differing config
rows), then with `trainyard jobs compare` and the SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e import test_console
from tests.e2e.test_console import screenshot, sign_in
from tests.support import StackProcess, bearer, wait_for_job
from trainyard import sdk
from trainyard.sdk_compare import CONFIG_FIELDS, flatten

# The console test's chromium and its page (which fails a test whose page threw).
browser, page = test_console.browser, test_console.page

ORG = "console-compare"
# Three jobs a few steps each: the second changes the rank, the third the learning rate.
SETTINGS = [(4, 0.002), (8, 0.002), (8, 0.02)]


def spec(rank: int, learning_rate: float) -> dict[str, Any]:
    return {
        "base_model": "fixture-tiny-llm",
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "project": "compare",
        "adaptation": {"mode": "lora", "rank": rank},
        "hyperparameters": {"max_steps": 3, "learning_rate": learning_rate},
        "resources": {"budget": 100},
    }


@pytest.fixture(scope="module")
def key(stack: StackProcess) -> str:
    return stack.create_key(ORG, "member")


@pytest.fixture(scope="module")
def trained(stack: StackProcess, key: str) -> Iterator[list[dict[str, Any]]]:
    """The three jobs, trained to their end (created together, so they queue at once)."""
    with httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60) as api:
        made = []
        for rank, rate in SETTINGS:
            answer = api.post("/v1/train/jobs", json=spec(rank, rate))
            assert answer.status_code == 200, answer.text
            made.append(answer.json())
        done = [
            wait_for_job(api, j["id"], lambda j: j["status"] in ("succeeded", "failed"))
            for j in made
        ]
    assert [j["status"] for j in done] == ["succeeded"] * 3, [j.get("failure_code") for j in done]
    yield done


def test_the_console_compares_three_picked_jobs(
    stack: StackProcess, key: str, trained: list[dict[str, Any]], page: Page, tmp_path: Path
) -> None:
    ids = [j["id"] for j in trained]
    sign_in(page, stack, key)
    compare = page.locator("#compare")
    expect(compare).to_have_attribute("aria-disabled", "true")
    for job_id in ids:
        page.locator(f"#jobs tr[data-job='{job_id}'] input[type=checkbox]").check()
    # The picks survive the list's refresh, and opening the page names the jobs.
    expect(compare).to_have_attribute("aria-disabled", "false")
    expect(compare).to_have_text("Compare 3")
    compare.click()
    expect(page.locator("#compare-chart")).to_have_attribute("data-series", "3")
    assert page.url.split("#", 1)[1].startswith("/compare?jobs=")
    assert set(page.url.split("jobs=", 1)[1].split(",")) == set(ids)

    # Three curves, a legend entry each, named by number, project and base.
    legend = page.locator("#compare-legend [data-job]")
    expect(legend).to_have_count(3)
    for job in trained:
        expect(page.locator(f"#compare-legend [data-job='{job['id']}']")).to_contain_text(
            f"#{job['number']} compare fixture-tiny-llm"
        )
    chart = page.locator("#compare-chart")
    expect(chart).to_have_attribute("data-axis", "step")
    expect(chart).to_have_attribute("data-x-max", "3")
    expect(page.locator("#compare-chart canvas")).to_be_visible()

    # By tokens seen, the x axis is the tokens the last step reached.
    seen = []
    with httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60) as api:
        for job_id in ids:
            (series,) = api.get(
                f"/v1/train/jobs/{job_id}/metrics", params={"names": "tokens_seen"}
            ).json()["series"]
            seen.append(series["points"][-1]["value"])
    page.click("#x-axis button[data-axis=tokens]")
    expect(chart).to_have_attribute("data-axis", "tokens")
    expect(chart).to_have_attribute("data-series", "3")
    expect(chart).to_have_attribute("data-x-max", str(round(max(seen))))
    page.click("#x-axis button[data-axis=step]")
    expect(chart).to_have_attribute("data-x-max", "3")

    # The evaluation blocks side by side, a column a job, a missing value a dash.
    runs = page.locator("#compare-runs")
    expect(runs.locator("thead th[data-job]")).to_have_count(3)
    for i, job in enumerate(trained):
        column = runs.locator("tbody tr[data-row='evaluation.best_loss'] td").nth(i)
        expect(column).to_have_text(f"{job['evaluation']['best_loss']:.4f}")
    expect(runs.locator("tr[data-row='evaluation.verdict'] td").first).to_have_text("—")
    expect(runs.locator("tr[data-row='stop_reason'] td").first).to_have_text("max_steps")
    expect(runs.locator("tr[data-row='tokens_seen'] td").first).to_have_text(f"{round(seen[0]):,}")

    # Only the rows that differ, the differing cells marked; "show all" adds the rest.
    config = page.locator("#compare-config tbody tr")
    expect(config).to_have_count(2)
    rank = page.locator("#compare-config tr[data-path='adaptation.rank']")
    expect(rank.locator("td")).to_have_text(["4", "8", "8"])
    expect(rank.locator("td.differs")).to_have_count(2)
    rate = page.locator("#compare-config tr[data-path='hyperparameters.learning_rate']")
    expect(rate.locator("td")).to_have_text(["0.002", "0.002", "0.02"])
    screenshot(page, tmp_path, "console-compare.png")
    page.check("#config-all")
    assert config.count() > 20
    expect(page.locator("#compare-config tr[data-path='base_model'] td.differs")).to_have_count(0)


def test_a_compare_page_of_one_job_says_how_many_to_pick(
    stack: StackProcess, key: str, page: Page
) -> None:
    sign_in(page, stack, key)
    expect(page.locator("#jobs")).to_be_visible()
    page.goto(f"{stack.url}/console/#/compare?jobs=job_0000000000000001")
    expect(page.locator(".error")).to_have_attribute("data-code", "invalid_request")
    expect(page.locator(".error .detail")).to_contain_text("2 to 6 jobs")


def test_the_cli_and_the_sdk_compare_the_same_jobs(
    stack: StackProcess, key: str, trained: list[dict[str, Any]]
) -> None:
    ids = [j["id"] for j in trained]
    done = stack.cli("jobs", "compare", *ids, key=key)
    lines = done.stdout.splitlines()
    (rank,) = [line for line in lines if "adaptation.rank" in line]
    assert rank.split()[1:] == ["4", "8", "8"]
    (rate,) = [line for line in lines if "hyperparameters.learning_rate" in line]
    assert rate.split()[1:] == ["0.002", "0.002", "0.02"]
    assert not [line for line in lines if "base_model" in line]
    for job in trained:
        (row,) = [line for line in lines if job["id"] in line]
        assert "succeeded" in row and "3/3" in row and "max_steps" in row
        assert f"{job['progress']['loss']:.4f}" in row
        assert f"{job['evaluation']['best_loss']:.4f} @ 3" in row

    with sdk.Client(stack.url, key) as client:
        comparison = client.compare_jobs(*ids)
    assert comparison.differences == {
        "adaptation.rank": [4, 8, 8],
        "hyperparameters.learning_rate": [0.002, 0.002, 0.02],
    }
    assert [r.step for r in comparison.runs] == [3, 3, 3]
    assert all(r.tokens_seen and r.tokens_seen > 0 for r in comparison.runs)
    # The SDK's flat config is the REST answer's, flattened as the console does.
    for job, flat in zip(trained, comparison.configs, strict=True):
        rest = {name: job[name] for name in CONFIG_FIELDS if name in job}
        rest["evaluation"] = {"suites": (job["evaluation"] or {}).get("suites", [])}
        rest["output"] = {"kind": rest["output"]["kind"]}  # its name is a label
        assert flatten(rest) == flat

    refused = stack.cli("jobs", "compare", ids[0], check=False, key=key)
    assert refused.returncode == 2 and "2 to 6" in refused.stderr
