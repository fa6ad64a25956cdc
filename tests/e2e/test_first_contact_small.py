"""What a new user meets around the executor and the first install (issue 27): a disk
that cannot hold a task, and the small things seen on a first walk of the README."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.e2e import test_console as console
from tests.support import StackProcess, bearer, eventually, org_executor, wait_for_job

ROOT = Path(__file__).resolve().parents[2]
ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")

# -- issue 27 item 2: the executor's disk ------------------------------------------------


def test_an_executor_whose_disk_cannot_hold_a_task_fails_it_saying_why(
    each_stack: StackProcess, tmp_path: Path
) -> None:
    """The executor's margin is more than any disk holds: the task is refused before a
    byte of it is written, and the job says why and what to do."""
    org, machine = f"disk-{secrets.token_hex(3)}", f"full-{secrets.token_hex(3)}"
    work = tmp_path / "work"
    key, log = each_stack.create_key(org, "executor"), tmp_path / "executor.log"
    margin = {"TRAINYARD_EXECUTOR_DISK_MARGIN_GIB": str(1024**3)}  # an exbibyte
    argv = ("--no-warm", "--trainer", "executor.scripted", "--work-dir", str(work))
    with org_executor(each_stack, key, machine, log, *argv, env=margin):
        client = httpx.Client(
            base_url=each_stack.url, headers=bearer(each_stack.create_key(org)), timeout=60
        )
        job = {
            "base_model": "fixture-tiny-llm",
            "dataset": {"uri": "fixture:synthetic-tiny-v1"},
            "resources": {"machines": [machine]},
            "hyperparameters": {"max_steps": 2},
        }
        created = client.post("/v1/train/jobs", json=job)
        assert created.status_code == 200, created.text
        done = wait_for_job(client, created.json()["id"], lambda j: j["status"] in ENDED)
    assert (done["status"], done["failure_code"], done["failure_category"]) == (
        "failed",
        "executor_disk_full",
        "executor",
    )
    assert "disk cannot hold the task" in done["failure_message"]
    assert "TRAINYARD_EXECUTOR_WORK_BUDGET_GIB" in done["failure_message"]
    # Nothing of the task was written, and the executor's log says what it lacked.
    assert not list((work / machine).glob("tsk_*"))
    assert "refusing it" in log.read_text()


# -- issue 27 item 8: small things a user sees ---------------------------------------------


def weed_log_lines(stack: StackProcess) -> list[str]:
    logs = sorted((stack.home / "seaweedfs" / "logs").glob("weed.*.log.*"))
    return [line for log in logs for line in log.read_text(errors="replace").splitlines()]


def test_seaweedfs_starts_without_an_error_line_about_its_iam(stack: StackProcess) -> None:
    """Its IAM finds the signing key it needs (security.toml's filer key): no error-level
    line about it in SeaweedFS's logs, where a user reading them after a start looks."""
    started = "Starting S3 API Server with standard IAM"
    # SeaweedFS flushes its log files every 30 s: its S3 start shows once they are.
    lines = eventually(
        lambda: weed_log_lines(stack), lambda got: any(started in x for x in got), "S3 start", 90
    )
    errors = [line for line in lines if line.startswith(("E", "F")) and line[1:5].isdigit()]
    assert not [line for line in errors if "IAM" in line or "signing" in line], errors


def test_the_readme_snippets_write_models_under_the_ignored_outputs_folder() -> None:
    """A walk of the README from a checkout leaves no model/, base/ or adapter/ folder in
    it: every download and export goes under outputs/, which git ignores."""
    from tests.e2e.test_readme import snippets

    code = "\n".join(s.code for s in snippets() if not s.skipped)
    targets = re.findall(r"trainyard (?:jobs download|models export) \S+ -o (\S+)", code)
    assert targets and all(t.startswith("outputs/") for t in targets), targets
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "outputs/" in ignored


# The console's browser and page, as its own tests open them (chromium by Playwright).
browser, page = console.browser, console.page


def test_the_console_shows_no_navigation_or_sign_out_while_signed_out(
    stack: StackProcess, page: Page, tmp_path: Path
) -> None:
    page.goto(f"{stack.url}/console/")
    expect(page.locator("#api-key")).to_be_visible()
    console.screenshot(page, tmp_path, "console-signed-out.png")
    for name in ("Sign out", "Jobs", "New job", "Wallet"):
        expect(page.get_by_text(name, exact=True)).to_be_hidden()
    console.sign_in(page, stack, stack.create_key(f"nav-{secrets.token_hex(3)}", "member"))
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.locator("#nav").get_by_role("link", name="New job")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#api-key")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
