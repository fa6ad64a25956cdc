"""The console's side of pins and the queue, in a real browser: a job waiting for a machine
that no executor serves says where it stands, its snapshot shows its cost a month, its
expiry and what keeps it, and is pinned and unpinned from the page; the wallet shows what
the org's storage costs. No training: the job is prepared and waits."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.test_console import browser, page, screenshot, sign_in
from tests.support import StackProcess, bearer, wait_for_job

__all__ = ["browser", "page"]  # the fixtures, used by name


def test_a_waiting_jobs_page_shows_its_place_and_pins_its_snapshot(
    stack: StackProcess, page: Page, tmp_path: Path
) -> None:
    key = stack.create_key("console-pins", "member")
    with httpx.Client(base_url=stack.url, headers=bearer(key), timeout=30) as api:
        made = api.post(
            "/v1/train/jobs",
            json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                  "hyperparameters": {"max_steps": 2}, "resources": {"machines": ["nowhere"]}},
        )  # fmt: skip
        assert made.status_code == 200, made.text
        job = wait_for_job(api, made.json()["id"], lambda j: bool(j.get("artifacts")), 120)
        (snapshot,) = [a["sha256"] for a in job["artifacts"]]
        try:
            sign_in(page, stack, key)
            page.locator(f"#jobs tr[data-job='{job['id']}'] a").click()
            expect(page.locator("#job-head")).to_contain_text(
                "position 1 of 1, no connected executor can take it yet"
            )
            row = page.locator(f"#artifacts-table tr[data-sha256='{snapshot}']")
            expect(row.locator(".cost")).to_contain_text("¢/month")
            expect(row.locator(".kept")).to_have_text(f"job:{job['id']}")
            expect(row.locator(".expires")).not_to_have_text("never (pinned)")
            row.locator("button.pin").click()
            expect(row.locator(".expires")).to_have_text("never (pinned)")
            expect(row.locator(".kept")).to_have_text("pinned")
            expect(row.locator("button.pin")).to_have_text("Unpin")
            assert api.get(f"/v1/train/artifacts/{snapshot}").json()["pinned"] is True
            screenshot(page, tmp_path, "console-pins.png")
            row.locator("button.pin").click()
            expect(row.locator("button.pin")).to_have_text("Pin")
            assert api.get(f"/v1/train/artifacts/{snapshot}").json()["pinned"] is False

            page.click("a[data-nav=wallet]")
            expect(page.locator("#balance")).to_contain_text("kept · ")
            expect(page.locator("#balance")).to_contain_text("¢/month")
        finally:
            api.post(f"/v1/train/jobs/{job['id']}/cancel", json={})
