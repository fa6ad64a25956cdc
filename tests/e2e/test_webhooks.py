"""Webhooks as an org meets them, through the gateway on SQLite and PostgreSQL, with a
receiver the test runs on 127.0.0.1 (the test stacks allow 127.0.0.1/32, nothing else):
a job's end received and verified with `standardwebhooks`, a 500 retried and shown in the
delivery log, a redelivery with the same `webhook-id`, addresses the deployment does not
allow refused at create, a stall and an expiring output found by the scans, and the CLI."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect
from standardwebhooks.webhooks import Webhook

from tests.e2e import test_console as console
from tests.support import (
    Receiver,
    StackProcess,
    bearer,
    eventually,
    org_executor,
    reason,
    wait_for_job,
)

ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")


def clients(stack: StackProcess) -> tuple[httpx.Client, httpx.Client, str]:
    """An org's admin and member over REST, and the org."""
    org = f"hooks-{secrets.token_hex(3)}"
    admin, member = (
        httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(org, role)), timeout=60)
        for role in ("admin", "member")
    )
    return admin, member, org


def test_a_jobs_end_is_delivered_signed_retried_logged_and_redelivered(
    each_stack: StackProcess,
) -> None:
    admin, member, _ = clients(each_stack)
    with Receiver(answers=[500]) as receiver:
        made = admin.post(
            "/v1/train/webhooks",
            json={"url": receiver.url, "events": ["job.cancelled", "job.failed"],
                  "description": "ops pager"},
        )  # fmt: skip
        assert made.status_code == 200, made.text
        hook = made.json()
        assert hook["id"].startswith("wh_") and hook["secret"].startswith("whsec_")
        assert hook["thresholds_percent"] == [50, 80, 100]
        # A job on a machine nobody serves, cancelled while queued: it ends at once.
        job = member.post(
            "/v1/train/jobs",
            json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                  "resources": {"machines": [f"nowhere-{secrets.token_hex(3)}"]}},
        ).json()  # fmt: skip
        assert member.post(f"/v1/train/jobs/{job['id']}/cancel", json={}).status_code == 200

        # The first attempt met a 500; the retry half a second later succeeded.
        got = receiver.wait_for(lambda r: len(r) >= 2)
        for headers, body in got:
            message = Webhook(hook["secret"]).verify(body, headers)
            assert message["type"] == "job.cancelled"
            assert message["data"]["job_id"] == job["id"]
            assert message["data"]["number"] == job["number"]
        assert got[0][0]["webhook-id"] == got[1][0]["webhook-id"]
        log = f"/v1/train/webhooks/{hook['id']}/deliveries"
        # The receiver holds the request before its answer reaches the platform, which
        # records the attempt once it has it.
        (delivery,) = eventually(
            lambda: member.get(log).json()["deliveries"],
            lambda found: found[0]["status"] != "pending",
            "the delivery's second attempt recorded",
        )
        assert (delivery["status"], delivery["attempts"], delivery["last_status_code"]) == (
            "succeeded", 2, 200,
        )  # fmt: skip
        assert delivery["last_error"] == "" and delivery["message_id"] == got[0][0]["webhook-id"]
        assert delivery["id"].startswith("whd_") and delivery["event_type"] == "job.cancelled"
        assert delivery["payload"]["data"]["job_id"] == job["id"]

        # A redelivery replays the message with its webhook-id, as a new entry of the log.
        again = admin.post(f"{log}/{delivery['id']}/redeliver", json={})
        assert again.status_code == 200, again.text
        assert again.json()["redelivery_of"] == delivery["id"]
        third = receiver.wait_for(lambda r: len(r) >= 3)[2]
        assert third[0]["webhook-id"] == delivery["message_id"]
        Webhook(hook["secret"]).verify(third[1], third[0])
        entries = member.get(log, params={"page_size": 1}).json()
        assert entries["deliveries"][0]["id"] == again.json()["id"] and entries["next_page_token"]

    # Reads are the org's people's, writes its admins'; no read answers the secret.
    listed = member.get("/v1/train/webhooks").json()["webhooks"]
    assert [h["id"] for h in listed] == [hook["id"]] and listed[0]["secret"] == ""
    assert member.get(f"/v1/train/webhooks/{hook['id']}").json()["url"] == receiver.url
    refused = member.post(
        "/v1/train/webhooks", json={"url": receiver.url, "events": ["job.failed"]}
    )
    assert (refused.status_code, reason(refused)) == (403, "permission_denied")
    assert member.post(f"{log}/{delivery['id']}/redeliver", json={}).status_code == 403
    # Another org's endpoint answers as an unknown one.
    stranger, _, _ = clients(each_stack)
    for path in (f"/v1/train/webhooks/{hook['id']}", log):
        answer = stranger.get(path)
        assert (answer.status_code, reason(answer)) == (404, "not_found")
    gone = admin.delete(f"/v1/train/webhooks/{hook['id']}")
    assert gone.json() == {"id": hook["id"], "deleted": True}
    assert admin.get(f"/v1/train/webhooks/{hook['id']}").status_code == 404


def test_an_address_the_deployment_does_not_allow_is_refused_at_create(
    each_stack: StackProcess,
) -> None:
    admin, _, _ = clients(each_stack)
    # Literal addresses only: a test never has a name looked up.
    for url in ("http://10.0.0.1/hook", "http://[::1]:8080/hook", "https://169.254.169.254/x",
                "http://127.0.0.2:8080/hook", "ftp://127.0.0.1/"):  # fmt: skip
        answer = admin.post("/v1/train/webhooks", json={"url": url, "events": ["job.failed"]})
        assert (answer.status_code, reason(answer)) == (400, "invalid_request"), url
        assert answer.json()["fields"] == ["url"] and url not in answer.text
    unknown = admin.post(
        "/v1/train/webhooks", json={"url": "http://127.0.0.1:9/", "events": ["job.exploded"]}
    )
    assert (unknown.status_code, unknown.json()["fields"]) == (400, ["events"])
    assert "artifact.expiring" in unknown.json()["supported"]
    extra = admin.post(
        "/v1/train/webhooks",
        json={"url": "http://127.0.0.1:9/", "events": ["job.failed"], "colour": "red"},
    )
    assert (extra.status_code, extra.json()["fields"]) == (400, ["colour"])
    assert admin.get("/v1/train/webhooks").json()["webhooks"] == []  # nothing was made


def test_a_stalled_job_its_expiring_output_and_its_end_are_announced(
    each_stack: StackProcess, tmp_path: Path
) -> None:
    """A scripted trainer silent 3 s before each step, on the org's own executor: the scans
    find the stall (1 s of silence) and the output (kept 30 days, announced within 90)."""
    admin, member, org = clients(each_stack)
    machine = f"slow-{secrets.token_hex(3)}"
    with Receiver() as receiver:
        hook = admin.post(
            "/v1/train/webhooks",
            json={"url": receiver.url, "events": ["job.stalled", "artifact.expiring", "job.succeeded"],
                  "stalled_after_seconds": 1, "expiring_within_seconds": 7776000},
        ).json()  # fmt: skip
        argv = ("--no-warm", "--trainer", "executor.scripted", "--work-dir", str(tmp_path / "w"))
        key = each_stack.create_key(org, "executor")
        with org_executor(
            each_stack, key, machine, tmp_path / "executor.log", *argv,
            env={"SCRIPTED_STEP_SECONDS": "3"},
        ):  # fmt: skip
            job = member.post(
                "/v1/train/jobs",
                json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                      "resources": {"machines": [machine]}, "hyperparameters": {"max_steps": 1}},
            ).json()  # fmt: skip
            done = wait_for_job(member, job["id"], lambda j: j["status"] in ENDED, timeout=120)
        assert done["status"] == "succeeded"

        def types(got: list[tuple[dict[str, str], bytes]]) -> list[str]:
            return [json.loads(body)["type"] for _, body in got]

        got = receiver.wait_for(
            lambda r: {"job.stalled", "artifact.expiring", "job.succeeded"} <= set(types(r))
        )
    messages = {}
    for headers, body in got:
        message = Webhook(hook["secret"]).verify(body, headers)
        messages.setdefault(message["type"], message)
    stalled = messages["job.stalled"]["data"]
    assert stalled["job_id"] == job["id"] and stalled["silent_seconds"] >= 1
    expiring = messages["artifact.expiring"]["data"]
    assert expiring["sha256"] == done["result"]["sha256"] and expiring["job_id"] == job["id"]
    # Each stall and each expiry once: the scans run every second and find them again.
    assert types(got).count("artifact.expiring") == 1
    assert messages["job.succeeded"]["data"]["status"] == "succeeded"


def test_the_cli_registers_lists_reads_and_deletes_an_endpoint(stack: StackProcess) -> None:
    org = f"hooks-cli-{secrets.token_hex(3)}"
    key = stack.create_key(org, "admin")
    made = stack.cli(
        "webhooks", "create", "http://127.0.0.1:9/hook", "--event", "job.failed",
        "--event", "budget.threshold", "--threshold", "90", key=key,
    )  # fmt: skip
    hook = json.loads(made.stdout)
    assert hook["secret"].startswith("whsec_") and "not shown again" in made.stderr
    assert hook["thresholds_percent"] == [90]
    listed = stack.cli("webhooks", "list", key=key).stdout
    assert f"{hook['id']}  job.failed,budget.threshold  http://127.0.0.1:9/hook" in listed
    read = json.loads(stack.cli("webhooks", "get", hook["id"], key=key).stdout)
    assert read["id"] == hook["id"] and "secret" not in read
    assert stack.cli("webhooks", "deliveries", hook["id"], key=key).stdout == ""
    refused = stack.cli(
        "webhooks", "create", "http://10.0.0.1/", "--event", "job.failed", key=key, check=False
    )
    assert refused.returncode == 1 and "invalid_request" in refused.stderr.lower()
    assert "field: url" in refused.stderr and "10.0.0.1" not in refused.stderr
    assert stack.cli("webhooks", "delete", hook["id"], key=key).stdout.strip().endswith("deleted")
    assert stack.cli("webhooks", "list", key=key).stdout == ""


# The console's browser and page, as its own tests open them (chromium by Playwright).
browser, page = console.browser, console.page


def test_the_console_registers_an_endpoint_shows_its_log_and_redelivers(
    stack: StackProcess, page: Page, tmp_path: Path
) -> None:
    admin, member, org = clients(stack)
    with Receiver(answers=[500]) as receiver:
        console.sign_in(page, stack, stack.create_key(org, "admin"))
        page.click("a[data-nav=webhooks]")
        page.fill("#webhook-url", receiver.url)
        page.fill("#webhook-description", "the on-call pager")
        cancelled = page.locator("#webhook-events input[value='job.cancelled']")
        expect(cancelled).to_be_checked()  # the jobs' ends are checked to begin with
        page.click("#webhook-events input[value='job.stalled']")
        page.click("button:has-text('Add endpoint')")
        expect(page.locator("#webhook-secret code")).to_contain_text("whsec_")
        secret = page.locator("#webhook-secret code").inner_text()
        expect(page.locator("#webhooks")).to_contain_text(receiver.url)
        (hook,) = admin.get("/v1/train/webhooks").json()["webhooks"]
        assert {"job.cancelled", "job.stalled"} <= set(hook["events"])
        assert hook["description"] == "the on-call pager"
        expect(cancelled).to_be_checked()  # the form is ready for the next one

        job = member.post(
            "/v1/train/jobs",
            json={"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                  "resources": {"machines": [f"nowhere-{secrets.token_hex(3)}"]}},
        ).json()  # fmt: skip
        member.post(f"/v1/train/jobs/{job['id']}/cancel", json={})
        receiver.wait_for(lambda r: len(r) >= 2)  # the 500, then its retry

        page.locator(f"#webhooks tr[data-webhook='{hook['id']}'] a").click()
        rows = page.locator("#deliveries tbody tr[data-delivery]")
        expect(rows).to_have_count(1)
        expect(rows.first.locator("[data-status]")).to_have_attribute(
            "data-status", "succeeded", timeout=10_000
        )
        expect(rows.first).to_contain_text("HTTP 200")
        expect(rows.first.locator("td.num")).to_have_text("2")
        rows.first.locator("button:has-text('Redeliver')").click()
        expect(rows).to_have_count(2)
        expect(rows.first).to_contain_text("redelivery")
        expect(rows.first.locator("[data-status]")).to_have_attribute(
            "data-status", "succeeded", timeout=10_000
        )
        third = receiver.wait_for(lambda r: len(r) >= 3)[2]
        assert Webhook(secret).verify(third[1], third[0])["data"]["job_id"] == job["id"]
        console.screenshot(page, tmp_path, "console-webhooks.png")

        page.on("dialog", lambda dialog: dialog.accept())  # the deletion's confirmation
        page.locator("button:has-text('Delete')").click()
        expect(page.locator("#webhooks")).to_contain_text("No endpoints yet.")
    assert admin.get("/v1/train/webhooks").json()["webhooks"] == []
