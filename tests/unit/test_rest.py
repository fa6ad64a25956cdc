"""The REST face's table: every reason of the contract has its HTTP status, and a refusal
reads as RFC 9457 says (or as the money wire does)."""

from __future__ import annotations

import json
import re

import pytest

from gateway import render
from gateway.render import LUA
from services.core import errors
from trainyard import rest


def test_every_reason_has_a_status_and_nothing_else_does() -> None:
    assert set(rest.STATUSES) == set(rest.reasons())
    assert set(rest.STATUSES) >= rest.AT_RETRY and set(rest.STATUSES) >= rest.MONEY


def test_the_seeds_statuses() -> None:
    seeds = {
        "LEASE_LOST": 409, "IN_USE": 409, "PUBLISHED": 409, "PENDING_LIMIT": 409,
        "ROUTE_CONFLICT": 409, "JOB_LIMIT": 409,
        "TRAINING_JOB_FINALIZING": 409, "TRAINING_JOB_NOT_IN_TRAINING": 409, "IDEMPOTENCY_KEY_REUSED": 409,
        "TRAINING_DATASET_SELECTION_INVALID": 422, "TRAINING_DATASET_EMPTY": 422, "TRAINING_DATASET_UNUSABLE": 422,
        "TRAINING_DATASET_CONFLICT": 422, "TRAINING_DURATION_EXCEEDS_LIMIT": 422, "INSUFFICIENT_BALANCE": 402,
        "SPEND_CAP_EXCEEDED": 402, "BALANCE_UNAVAILABLE": 503, "METHOD_NOT_ALLOWED": 405,
        "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
    }  # fmt: skip
    assert {reason: rest.status_of(reason) for reason in seeds} == seeds
    # 002: a dataset or duration refusal is 422 at create and 409 at a retry.
    assert rest.status_of("TRAINING_DURATION_EXCEEDS_LIMIT", retry=True) == 409
    assert rest.status_of("TRAINING_DATASET_EMPTY", retry=True) == 409


def test_a_refusal_is_a_problem_document_naming_fields_and_the_supported_set() -> None:
    refused = errors.ValidationError(
        "adaptation.mode", "is not supported", metadata={"supported": "full,lora"}
    )
    status, body = errors.rest_refusal(refused.to_status())
    assert status == 400
    assert json.loads(body) == {
        "type": "https://trainyard.dev/problems/invalid-request",
        "title": "Invalid request",
        "status": 400,
        "detail": "Field adaptation.mode is not supported.",
        "code": "invalid_request",
        "fields": ["adaptation.mode"],
        "supported": ["full", "lora"],
    }


def test_the_money_refusals_answer_the_money_wire() -> None:
    refused = errors.DomainError(
        "The payer cannot hold the first window.",
        reason="INSUFFICIENT_BALANCE",
        code=errors.FailedPrecondition.code,
    )
    status, body = errors.rest_refusal(refused.to_status())
    assert status == 402
    assert json.loads(body) == {
        "error": {
            "code": "insufficient_balance",
            "message": "The payer cannot hold the first window.",
        }
    }


def test_an_internal_failure_says_only_its_request_id() -> None:
    status, body = errors.rest_refusal(errors.internal_status("r-123"))
    assert status == 500 and json.loads(body)["code"] == "internal_error"
    assert json.loads(body)["metadata"] == {"request_id": "r-123"}


# Every refusal code HIP-1333 and the fine-tune contract name, as they spell it.
SEED_CODES = {
    "invalid_request", "unsupported_base", "incompatible_adapters", "incompatible_basis",
    "unsupported_adaptation", "unsupported_objective", "unsupported_protect",
    "unsupported_output", "unsupported_device", "budget_required", "insufficient_balance",
    "spend_cap_exceeded", "balance_unavailable", "job_limit", "lease_lost", "published",
    "in_use", "pending_limit", "route_conflict", "engine_full", "training_unavailable",
    "training_duration_exceeds_limit", "training_dataset_selection_invalid",
    "training_dataset_empty", "training_dataset_unusable", "training_job_not_in_training",
    "training_job_finalizing",
}  # fmt: skip


def test_every_seed_code_is_a_reason_in_lower_case() -> None:
    assert {reason.lower() for reason in rest.reasons()} >= SEED_CODES


@pytest.mark.parametrize("reason", sorted(rest.STATUSES))
def test_a_problem_answers_its_reason_in_lower_case(reason: str) -> None:
    body = rest.refusal(reason, "A safe detail.", status=rest.status_of(reason))
    code = body["error"]["code"] if reason in rest.MONEY else body["code"]
    assert code == reason.lower()


def test_the_gateways_own_refusals_are_reasons_of_the_table() -> None:
    script = LUA.read_text()
    named = set(re.findall(r'\[\d+\] = "([A-Z_]+)"', script))
    named |= set(re.findall(r'problem\(\d+, "([A-Z_]+)"', script))
    assert named and named <= set(rest.STATUSES)
    # The titles the script answers with are generated from the table.
    assert "TITLES = {" in render._lua() and "TITLES = {" not in script
