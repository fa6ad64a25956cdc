"""The console's Keys and Audit pages and its limits panel in a real browser: an org's admin
makes a limited key and sees its secret once, rotates and revokes it from the page (the
API refuses the old secrets at once), reads the trail filtered by action, and the wallet
page shows the org's limits."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.test_console import browser, page, screenshot, sign_in  # noqa: F401 (fixtures)
from tests.support import StackProcess, bearer


def refused(stack: StackProcess, secret: str) -> str:
    answer = httpx.get(f"{stack.url}/v1/train/models", headers=bearer(secret), timeout=30)
    assert answer.status_code == 401, answer.text
    return str(answer.json()["metadata"]["problem"])


def test_an_admin_makes_rotates_and_revokes_a_key_and_reads_the_trail(
    stack: StackProcess,
    page: Page,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    org = f"console-keys-{secrets.token_hex(3)}"
    sign_in(page, stack, stack.create_key(org, "admin"))
    expect(page.locator("#jobs")).to_be_visible()
    page.click("a[data-nav=keys]")
    page.select_option("#key-role", "member")
    page.fill("#key-label", "ci-bot")
    page.fill("#key-projects", "bots, web")
    page.fill("#key-cap", "250")
    page.click("#key-form button[type=submit]")
    secret = page.locator("#key-secret")
    expect(secret).to_contain_text("ty_")
    first = secret.inner_text()
    row = page.locator("#keys tr", has_text="ci-bot")
    expect(row).to_contain_text("projects: bots, web")
    expect(row).to_contain_text("$2.50")
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "active")
    screenshot(page, tmp_path, "console-keys.png")

    page.on("dialog", lambda dialog: dialog.accept())
    row.locator("button.rotate").click()
    expect(page.locator("#key-made")).to_contain_text("Rotated")
    second = page.locator("#key-secret").inner_text()
    assert second.startswith("ty_") and second != first
    assert refused(stack, first) == "rotated"
    row.locator("button.revoke").click()
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "revoked")
    expect(page.locator("#key-secret")).to_have_count(0)  # a secret is shown only once
    assert refused(stack, second) == "revoked"

    page.click("a[data-nav=audit]")
    page.fill("#audit-action", "training.key.*")
    page.click("#audit-filters button[type=submit]")
    # The unfiltered trail shown before the filter may hold the same rows: wait for the
    # filtered page, then for its rows (a count alone can be read off the page it replaces).
    expect(page).to_have_url(re.compile(r"#/audit\?action=training\.key\.\*$"))
    expect(page.locator("#audit tbody tr td:nth-child(2)")).to_have_text(
        ["training.key.revoked", "training.key.rotated", "training.key.created"]
    )
    expect(page.locator("#audit tbody tr").first).to_contain_text("admin")
    screenshot(page, tmp_path, "console-audit.png")

    page.click("a[data-nav=wallet]")
    limits = page.locator("#limits")
    expect(limits).to_contain_text("Active jobs")
    expect(limits).to_contain_text("0 of 64")
    expect(limits).to_contain_text("This key")


def test_a_member_is_told_the_keys_are_an_admins(
    stack: StackProcess,
    page: Page,  # noqa: F811 (the fixture imported above)
) -> None:
    sign_in(page, stack, stack.create_key(f"console-m-{secrets.token_hex(3)}", "member"))
    expect(page.locator("#jobs")).to_be_visible()
    page.click("a[data-nav=keys]")
    expect(page.locator(".error[data-code=permission_denied]")).to_be_visible()
