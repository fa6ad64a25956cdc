"""Pure logic of the core: errors, ids, page tokens, config, the gateway's config."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.render import render
from services.core import errors, ids
from services.core.config import Config, ConfigError
from services.core.offers import Offer
from services.core.pagetoken import PageTokens, page_size
from tests.support import assert_envoy_accepts
from trainyard.claim.v1 import task_pb2
from trainyard.common.v1 import error_reason_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import Catalog


def test_every_seed_reason_is_in_the_one_enum() -> None:
    seeds = {
        "UNAUTHENTICATED", "PERMISSION_DENIED", "INVALID_REQUEST", "MALFORMED_JSON", "NOT_FOUND",
        "INVALID_TRANSITION", "METHOD_NOT_ALLOWED", "CONFLICT", "INTERNAL_ERROR",
        "UNSUPPORTED_BASE", "UNSUPPORTED_ADAPTATION", "BUDGET_REQUIRED", "INSUFFICIENT_BALANCE",
        "SPEND_CAP_EXCEEDED", "BALANCE_UNAVAILABLE", "JOB_LIMIT", "LEASE_LOST", "PUBLISHED", "IN_USE",
        "PENDING_LIMIT", "ROUTE_CONFLICT", "TRAINING_DATASET_SELECTION_INVALID",
        "TRAINING_DATASET_EMPTY", "TRAINING_DATASET_UNUSABLE", "TRAINING_DATASET_CONFLICT",
        "TRAINING_DURATION_EXCEEDS_LIMIT", "TRAINING_JOB_NOT_IN_TRAINING",
        "TRAINING_JOB_FINALIZING", "IDEMPOTENCY_KEY_REUSED",
    }  # fmt: skip
    assert seeds <= errors.REASONS
    assert len(error_reason_pb2.ErrorReason.keys()) == len(errors.REASONS) + 1


def test_a_domain_error_becomes_a_status_with_one_error_info() -> None:
    exc = errors.ValidationError("hyperparameters.learning_rate", "must be at most 1")
    status = exc.to_status()
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert errors.reason_of(status) == "INVALID_REQUEST"
    assert "hyperparameters.learning_rate" in status.message


def test_an_unknown_reason_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        errors.DomainError(reason="SOMETHING_NEW")


def test_an_internal_error_carries_only_the_request_id() -> None:
    status = errors.internal_status("req-1")
    assert errors.reason_of(status) == "INTERNAL_ERROR"
    assert status.message == "Internal error; request id req-1."


def test_derived_ids_are_stable_and_distinct() -> None:
    assert ids.derived_id("job", "acme", "k1") == ids.derived_id("job", "acme", "k1")
    assert ids.derived_id("job", "acme", "k1") != ids.derived_id("job", "globex", "k1")
    assert ids.is_id(ids.new_id("job"), "job")
    assert not ids.is_id("job_../../etc", "job")


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=10), max_size=4))
def test_a_page_token_round_trips_within_its_scope(position: dict) -> None:  # type: ignore[type-arg]
    tokens = PageTokens(b"k" * 32)
    scope = {"org": "acme", "method": "ListJobs", "status": "queued"}
    assert tokens.decode(tokens.encode(position, scope), scope) == position


@pytest.mark.parametrize(
    "other_scope",
    [
        {"org": "globex", "method": "ListJobs"},
        {"org": "acme", "method": "ListJobs", "status": "failed"},
    ],
)
def test_a_page_token_is_refused_in_another_scope(other_scope: dict) -> None:  # type: ignore[type-arg]
    tokens = PageTokens(b"k" * 32)
    token = tokens.encode({"after": "job_1"}, {"org": "acme", "method": "ListJobs"})
    with pytest.raises(errors.ValidationError):
        tokens.decode(token, other_scope)


@given(st.text(min_size=1, max_size=80))
def test_a_forged_page_token_is_a_validation_error(token: str) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        PageTokens(b"k" * 32).decode(token, {"org": "acme"})
    assert caught.value.message == "Field page_token is not a token issued for this request."


def test_page_size_defaults_and_caps() -> None:
    assert page_size(0) == 25
    assert page_size(500) == 100
    with pytest.raises(errors.ValidationError):
        page_size(-1)


def test_config_defaults() -> None:
    config = Config.from_env({})
    assert config.gateway_port == 8080
    assert config.lease_ttl_seconds == 600
    assert config.database_url == f"sqlite:///{config.home / 'trainyard.db'}"
    assert config.home.name == ".trainyard"


def test_the_rendered_gateway_config_is_valid_for_envoy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = render(
        listen_host="127.0.0.1",
        listen_port=1,
        admin_port=2,
        admin_socket=tmp_path / "admin.sock",
        ports={"jobs": 3, "claims": 4, "artifacts": 5, "meter": 6},
    )
    assert_envoy_accepts(config, tmp_path)


@pytest.mark.parametrize(
    ("ttl", "interval", "report"), [("600", "", 20), ("6", "", 2), ("3", "", 1), ("60", "5", 5)]
)
def test_the_report_interval_follows_the_lease(ttl: str, interval: str, report: int) -> None:
    env = {"TRAINYARD_LEASE_TTL_SECONDS": ttl, "TRAINYARD_REPORT_INTERVAL_SECONDS": interval}
    assert Config.from_env(env).report_seconds == report


def test_a_lease_too_short_for_three_reports_is_refused() -> None:
    with pytest.raises(ConfigError, match="TRAINYARD_LEASE_TTL_SECONDS must be at least 3"):
        Config.from_env({"TRAINYARD_LEASE_TTL_SECONDS": "2"})


def test_an_offer_read_back_from_its_row_is_the_offer_and_places_jobs_alike() -> None:
    """`Offer.from_json` rebuilds what `to_json` stored in `ExecutorRow.offer`; a stored
    offer written before `protect`, `terms` and `clients` existed reads them as empty."""
    supports = task_pb2.Supports(adaptations=["lora"], outputs=["checkpoint"], terms=["sft"])
    offer = Offer.parse("box-1", False, ["fixture-tiny-llm"], ["cuda", "cpu"], supports, 2)
    assert Offer.from_json(offer.to_json()) == offer
    old = {k: v for k, v in offer.to_json().items() if k not in ("protect", "terms", "clients")}
    assert Offer.from_json(old) == Offer(
        "box-1", False, ("fixture-tiny-llm",), ("cuda", "cpu"), ("lora",), ("checkpoint",)
    )
    job = job_pb2.Job(base_model="fixture-tiny-llm")
    job.adaptation.mode = "lora"
    job.output.kind = "checkpoint"
    job.resources.devices.append("cpu")
    assert Offer.from_json(offer.to_json()).device_for(job, Catalog()) == "cpu"
    job.protect.distillation = True
    assert Offer.from_json(offer.to_json()).device_for(job, Catalog()) is None
