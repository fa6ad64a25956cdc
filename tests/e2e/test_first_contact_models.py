"""What a new user meets first about models and admission (issue 27): a model placed in
the models directory, and a job that could never reach its first step."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

from tests.support import StackProcess, make_local_model, reason, wait_for_job

ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")

# -- issue 27 item 7: a model placed in TRAINYARD_MODELS_DIR is listed without a restart ---


def listed(api: object, name: str) -> bool:
    models = api.get("/v1/train/models").json()["models"]  # type: ignore[attr-defined]
    return name in [m["name"] for m in models]


def test_a_model_placed_in_the_models_dir_is_listed_and_trains_without_a_restart(
    tmp_path: Path,
) -> None:
    # A stack of its own: the models it lists change while the test runs, which no other
    # test's listing should meet.
    stack = StackProcess(tmp_path / "home").start()
    try:
        placed_model_trains(stack, tmp_path)
    finally:
        stack.stop()


def placed_model_trains(stack: StackProcess, tmp_path: Path) -> None:
    name = f"placed-{secrets.token_hex(3)}"
    body = {
        "base_model": name,
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "hyperparameters": {"max_steps": 2},
        "resources": {"budget": 100},
    }
    with stack.member_client() as api:
        # Before: refused, saying where a base comes from, never where that is on disk.
        refused = api.post("/v1/train/jobs", json=body)
        assert refused.status_code == 400 and reason(refused) == "unsupported_base"
        detail = refused.json()["detail"]
        assert "TRAINYARD_MODELS_DIR" in detail and "GET /v1/train/models" in detail
        assert str(stack.home) not in refused.text and name not in refused.text
        assert not listed(api, name)

        placed = stack.home / "models" / name
        shutil.copytree(make_local_model(tmp_path / name), placed)
        try:
            assert listed(api, name)
            created = api.post("/v1/train/jobs", json=body)
            assert created.status_code == 200, created.text
            job = wait_for_job(api, created.json()["id"], lambda j: j["status"] in ENDED)
            assert job["status"] == "succeeded", job
        finally:
            shutil.rmtree(placed)
        assert not listed(api, name)


# -- issue 27 item 6: admitted, then stopped at step 0 --------------------------------------

FIXTURE_JOB = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}


def test_a_max_seconds_that_cannot_reach_a_first_step_is_refused_at_create_and_estimate(
    each_stack: StackProcess,
) -> None:
    body = {**FIXTURE_JOB, "resources": {"budget": 100, "max_seconds": 5}}
    with each_stack.member_client() as api:
        for path in ("/v1/train/jobs", "/v1/train/estimate"):
            refused = api.post(path, json=body)
            assert refused.status_code == 400 and reason(refused) == "invalid_request", path
            problem = refused.json()
            assert problem["fields"] == ["resources.max_seconds"]
            assert "first step" in problem["detail"] and int(problem["metadata"]["min"]) > 5
        enough = {
            **body,
            "resources": {"budget": 100, "max_seconds": int(problem["metadata"]["min"])},
        }
        assert api.post("/v1/train/estimate", json=enough).status_code == 200
        assert api.get("/v1/train/jobs").json()["total_size"] == 0  # nothing was created


def test_a_budget_that_cannot_pay_a_first_step_is_refused(stack: StackProcess) -> None:
    body = {**FIXTURE_JOB, "hyperparameters": {"max_seq_length": 2048}, "resources": {"budget": 1}}
    with stack.member_client() as api:
        price = api.post("/v1/train/estimate", json={**body, "resources": {"budget": 100}}).json()
        for path in ("/v1/train/jobs", "/v1/train/estimate"):
            refused = api.post(path, json=body)
            assert refused.status_code == 400 and reason(refused) == "invalid_request", path
            assert refused.json()["fields"] == ["resources.budget"]
    assert price["expected"]["micro_cents"]


def test_the_cli_estimate_fails_with_the_refusal_a_create_meets(
    stack: StackProcess, tmp_path: Path
) -> None:
    key = stack.create_key(f"org-{secrets.token_hex(4)}")
    (tmp_path / "job.json").write_text(json.dumps(FIXTURE_JOB))
    estimate = stack.cli("jobs", "estimate", "-f", str(tmp_path / "job.json"), check=False, key=key)
    create = stack.cli("jobs", "create", "-f", str(tmp_path / "job.json"), check=False, key=key)
    assert (estimate.returncode, create.returncode) == (1, 1)
    assert estimate.stdout.splitlines()[-1].startswith("price      $")  # what to budget for
    refusal = "error: BUDGET_REQUIRED: Field resources.budget is required"
    assert estimate.stderr.startswith(refusal) and create.stderr.startswith(refusal)
    (tmp_path / "job.json").write_text(json.dumps({**FIXTURE_JOB, "resources": {"budget": 100}}))
    admitted = stack.cli("jobs", "estimate", "-f", str(tmp_path / "job.json"), key=key)
    assert admitted.returncode == 0 and admitted.stderr == ""
