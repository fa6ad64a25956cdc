"""The console in a real browser (Debian's chromium driven by Playwright) against the stack:
sign in, watch a job train live to its end, cancel one, and a bad key's error."""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from tests.support import StackProcess

CHROMIUM = shutil.which("chromium")
# Where the README's screenshots come from: set it to refresh them.
SCREENSHOTS = os.environ.get("TRAINYARD_SCREENSHOT_DIR", "")
TRAINING = 60_000  # ms: a fixture job of 60 steps trains in about 20 s on 2 cores


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.fail("chromium is missing: `apt-get install chromium` (make test installs it)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"the page threw: {errors}"


def sign_in(page: Page, stack: StackProcess, key: str) -> None:
    page.goto(f"{stack.url}/console/")
    page.fill("#api-key", key)
    page.click("button[type=submit]")


def create(api: httpx.Client, steps: int) -> dict:  # type: ignore[type-arg]
    body = {
        "base_model": "fixture-tiny-llm",
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "hyperparameters": {"max_steps": steps},
        "resources": {"budget": 100},
    }
    answer = api.post("/v1/train/jobs", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def screenshot(page: Page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=tmp_path / name, full_page=True)
    if SCREENSHOTS:
        page.screenshot(path=Path(SCREENSHOTS) / name, full_page=True)


def test_a_member_signs_in_and_watches_a_job_train_to_its_end(
    stack: StackProcess, page: Page, tmp_path: Path
) -> None:
    org = "console-watch"
    key = stack.create_key(org, "member")
    with httpx.Client(
        base_url=stack.url, headers={"authorization": f"Bearer {key}"}, timeout=30
    ) as api:
        job = create(api, 60)
        sign_in(page, stack, key)
        row = page.locator(f"#jobs tr[data-job='{job['id']}']")
        expect(row).to_be_visible()
        row.locator("a").click()
        expect(page.locator("#job-head h1")).to_contain_text(f"Job #{job['number']}")

        # Every count of points the chart draws, as the page draws them.
        page.evaluate(
            """() => {
              const chart = document.getElementById("chart");
              window.seen = [chart.dataset.points || "0"];
              new MutationObserver(() => window.seen.push(chart.dataset.points))
                .observe(chart, { attributes: true, attributeFilter: ["data-points"] });
            }"""
        )
        head = page.locator("#job-head [data-status]").first
        expect(head).to_have_attribute("data-status", "succeeded", timeout=TRAINING * 3)
        expect(page.locator("#outcome")).to_contain_text("Outcome")
        expect(page.locator("#chart")).to_have_attribute("data-points", "60")
        seen = {int(n) for n in page.evaluate("window.seen")}
        # It grew while the job ran: some count between none and all was drawn.
        assert any(0 < n < 60 for n in seen), seen
        done = api.get(f"/v1/train/jobs/{job['id']}").json()
        assert done["status"] == "succeeded"
        expect(page.locator("#job-head")).to_contain_text(f"{done['progress']['loss']:.4f}")
        # The throughput panel: the last step's pace, and no MFU on the CPU.
        panel = page.locator("#throughput")
        # Rounded as the page rounds (`Math.round`: halves up; Python's `round` goes to even).
        shown = math.floor(done["progress"]["tokens_per_second"] + 0.5)
        expect(panel).to_contain_text(f"{shown:,}")
        expect(panel).to_contain_text("Samples/s")
        expect(panel.locator("#mfu")).to_have_text("n/a: no known peak for this device")
        expect(page.locator("#chart canvas")).to_be_visible()
        screenshot(page, tmp_path, "console-job.png")

        # Its checkpoint is published from the page under the output's name.
        page.click("#publish")
        page.fill("#publish-name", "console-watch-model")
        page.click("#publishing button[type=submit]")
        expect(page.locator("#publishing")).to_contain_text("console-watch-model")
        published = api.get(f"/v1/train/artifacts/{done['result']['sha256']}").json()
        assert published["published"] is True

        page.click("a[data-nav=jobs]")
        expect(row.locator("[data-status]")).to_have_attribute("data-status", "succeeded")
        screenshot(page, tmp_path, "console-jobs.png")


def test_a_job_made_from_the_form_after_its_estimate_is_cancelled_from_its_page(
    stack: StackProcess, page: Page
) -> None:
    key = stack.create_key("console-cancel", "member")
    sign_in(page, stack, key)
    page.click("a[data-nav=new]")
    page.fill("#max-steps", "100")
    create = page.locator("button:has-text('Create job')")
    expect(create).to_be_disabled()
    page.click("button:has-text('Estimate')")
    expect(page.locator("#estimate")).to_contain_text("Expected price")
    expect(page.locator("#estimate")).to_contain_text("100")  # the planned steps
    create.click()
    expect(page).to_have_url(re.compile(r"#/jobs/job_"))
    job_id = page.url.rsplit("/", 1)[1]
    asked: list[str] = []

    def confirm(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", confirm)
    page.click("#cancel")
    head = page.locator("#job-head [data-status]").first
    expect(head).to_have_attribute("data-status", "cancelled", timeout=TRAINING)
    assert asked and "Cancel job #" in asked[0]
    with httpx.Client(
        base_url=stack.url, headers={"authorization": f"Bearer {key}"}, timeout=30
    ) as api:
        (job,) = api.get("/v1/train/jobs").json()["jobs"]
    assert (job["id"], job["status"]) == (job_id, "cancelled")
    expect(page.locator("#retry")).to_be_visible()


def test_a_bad_key_shows_the_apis_code_and_detail(stack: StackProcess, page: Page) -> None:
    sign_in(page, stack, "ty_not-a-key")
    error = page.locator(".error")
    expect(error).to_have_attribute("data-code", "unauthenticated")
    expect(error.locator(".detail")).not_to_be_empty()
    expect(page.locator("#api-key")).to_be_visible()


def test_the_console_runs_only_its_own_code(stack: StackProcess) -> None:
    answer = httpx.get(f"{stack.url}/console/")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in answer.headers["content-security-policy"]
    for asset in ("app.js", "app.css", "uplot.js", "uplot.css"):
        assert httpx.get(f"{stack.url}/console/{asset}").status_code == 200, asset
    assert httpx.get(f"{stack.url}/console").headers["location"].endswith("/console/")
