"""Decision jobs through the stack, as a user runs them: a readout on the fixture decision
set, unprotected and protected by projection, over REST; their grades, verdicts, metrics
and publishing; and a decision job over the CLI."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_artifacts_rest import upload
from tests.support import StackProcess
from trainyard.training import decisions

BODY: dict[str, Any] = {
    "base_model": "fixture-tiny-decider",
    "dataset": {"uri": "fixture:decisions-tiny-v1"},
    "adaptation": {"mode": "readout"},
    "hyperparameters": {"learning_rate": 0.5, "max_steps": 100},
    "protect": {
        "suites": ["sentiment", "topic", "spam"],
        "budget": {"accuracy": 0.02, "ece": 0.02},
    },
    "resources": {"budget": 100},
}
ENDED = {"succeeded", "rejected", "failed", "cancelled", "stopped"}


def ended(api: httpx.Client, job_id: str, timeout: float = 300.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The events long-poll answers at once when the job has ended.
        api.get(f"/v1/train/jobs/{job_id}/events", params={"after": 0, "wait": 20, "page_size": 1})
        job: dict[str, Any] = api.get(f"/v1/train/jobs/{job_id}").json()
        if job["status"] in ENDED:
            return job
    raise AssertionError(f"{job_id} did not end")


def grades(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["suite"]: g for g in job["evaluation"]["grades"]}


def test_projection_keeps_the_protected_suites_where_the_unprotected_readout_breaks_them(
    stack: StackProcess,
) -> None:
    key = stack.create_key("decisions", "member")
    with httpx.Client(
        base_url=stack.url, headers={"authorization": f"Bearer {key}"}, timeout=60
    ) as api:
        bare = api.post("/v1/train/jobs", json=BODY)
        assert bare.status_code == 200, bare.text
        protected_body = {**BODY, "protect": {**BODY["protect"], "projection": {"strength": 1}}}
        protected = api.post("/v1/train/jobs", json=protected_body).json()
        unprotected = ended(api, bare.json()["id"])
        kept = ended(api, protected["id"])

        assert (unprotected["status"], unprotected["evaluation"]["verdict"]) == (
            "rejected",
            "rejected",
        )
        assert (kept["status"], kept["evaluation"]["verdict"]) == ("succeeded", "accepted")
        for job in (unprotected, kept):
            found = grades(job)
            assert list(found) == ["queue", "sentiment", "topic", "spam"]
            assert found["queue"]["role"] == "target"
            # Both learn the question the base could not answer.
            assert found["queue"]["trained"]["accuracy"] > found["queue"]["base"]["accuracy"] + 0.3
        assert all(grades(kept)[s]["within_budget"] for s in ("sentiment", "topic", "spam"))
        assert not all(
            grades(unprotected)[s]["within_budget"] for s in ("sentiment", "topic", "spam")
        )
        # A rejected job keeps what it made.
        assert unprotected["result"]["kind"] == "capability" and unprotected["model_available"]

        # The grades and the projection's share are series of the job.
        series = {
            s["name"]: s["points"]
            for s in api.get(f"/v1/train/jobs/{kept['id']}/metrics").json()["series"]
        }
        (point,) = series["suite/queue/accuracy"]
        assert point["value"] == pytest.approx(
            grades(kept)["queue"]["trained"]["accuracy"], abs=1e-6
        )
        assert "base/sentiment/ece" in series
        assert any(name.startswith("projection/") for name in series)

        # The accepted capability publishes with its question; the rejected one only forced.
        published = api.post(
            f"/v1/train/jobs/{kept['id']}/publish",
            json={"name": "triage", "route": {"keys": ["queue"]}},
        )
        assert published.status_code == 200, published.text
        assert (published.json()["form"], published.json()["forced"]) == ("head", False)
        refused = api.post(
            f"/v1/train/jobs/{unprotected['id']}/publish",
            json={"name": "triage-raw", "route": {"keys": ["queue-raw"]}},
        )
        assert (refused.status_code, refused.json()["code"]) == (409, "invalid_transition")
        forced = api.post(
            f"/v1/train/jobs/{unprotected['id']}/publish",
            json={"name": "triage-raw", "route": {"keys": ["queue-raw"]}, "force": True},
        )
        assert forced.status_code == 200 and forced.json()["forced"] is True
        conflict = api.post(
            f"/v1/train/jobs/{unprotected['id']}/publish",
            json={"name": "triage-again", "route": {"keys": ["queue"]}, "force": True},
        )
        assert (conflict.status_code, conflict.json()["code"]) == (409, "route_conflict")


def test_a_decision_job_over_the_cli_prints_its_grades_and_verdict(
    stack: StackProcess, tmp_path: Path
) -> None:
    key = stack.create_key("decisions-cli", "member")
    spec = tmp_path / "decision.json"
    spec.write_text(
        json.dumps({**BODY, "hyperparameters": {"max_steps": 30}, "protect": {"suites": ["topic"]}})
    )
    done = stack.cli("jobs", "create", "-f", str(spec), "--yes", "--watch", key=key, check=False)
    assert "verdict " in done.stdout
    # A watched job that ends rejected exits 3, as `jobs watch` does; accepted, 0.
    assert done.returncode == (3 if "verdict rejected" in done.stdout else 0), done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()}
    assert "target" in lines["queue"] and "protected" in lines["topic"]


def test_uploaded_decision_rows_train_and_a_bad_line_is_named(stack: StackProcess) -> None:
    key = stack.create_key("decisions-upload", "member")
    question = {"type": "noul", "instructions": "is it urgent", "criteria": ["no", "yes"]}
    words = (["later", "someday", "whenever"], ["now", "asap", "immediately"])
    rows = [
        {
            "state": f"please reply {words[i % 2][i % 3]} about case {i}",
            "questions": {"urgent": question},
            "target": {"urgent": [0, 1] if i % 2 else [1, 0]},
        }
        for i in range(120)
    ]
    good = "".join(json.dumps(r) + "\n" for r in rows).encode()
    with httpx.Client(
        base_url=stack.url, headers={"authorization": f"Bearer {key}"}, timeout=60
    ) as api:
        protect = {"suites": ["spam"], "projection": {}}
        body = {**BODY, "hyperparameters": {"max_steps": 20}, "protect": protect}
        # A bad line is refused as the upload is confirmed, before any job names it.
        bad = good + b'{"state": "two questions", "questions": {}, "target": {}}\n'
        digest = hashlib.sha256(bad).hexdigest()
        grant = api.post(
            "/v1/train/artifacts",
            json={"kind": "dataset", "name": "bad.jsonl", "sha256": digest, "size": len(bad)},
        ).json()
        httpx.put(grant["upload"]["url"], content=bad, headers=grant["upload"]["headers"])
        refused = api.post(f"/v1/train/artifacts/{digest}/confirm", json={})
        assert (refused.status_code, refused.json()["code"]) == (422, "training_dataset_unusable")
        assert "121" in refused.json()["detail"] and "two questions" not in refused.text
        assert api.get(f"/v1/train/artifacts/{digest}").status_code == 404

        made = api.post(
            "/v1/train/jobs", json={**body, "dataset": {"uri": f"artifact:{upload(api, good)}"}}
        )
        assert made.status_code == 200, made.text
        job = ended(api, made.json()["id"])
        assert job["status"] == "succeeded", job["evaluation"]
        assert [g["suite"] for g in job["evaluation"]["grades"]] == ["urgent", "spam"]
        assert job["eval_examples"] == sum(1 for r in rows if decisions.held_out(r["state"]))
