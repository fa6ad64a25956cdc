"""Decision rows (HIP-1333 §4): what parses, what fails naming its line, the holdout by
state, the snapshot round trip, and what a create on the decision base accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.core import errors
from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.training import decisions
from trainyard.training.catalog import Catalog
from trainyard.training.datasets import DatasetError

# §4's example, as the seed writes it.
EXAMPLE = {
    "state": "my card was charged twice",
    "questions": {
        "queue": {
            "type": "choice",
            "instructions": "which queue",
            "criteria": ["billing", "bug", "other"],
        }
    },
    "target": {"queue": [1, 0, 0]},
}


def lines(*rows: Any) -> bytes:
    return b"\n".join(r if isinstance(r, bytes) else json.dumps(r).encode() for r in rows)


def test_the_seeds_row_parses_with_its_question_and_target() -> None:
    (row,) = decisions.parse_jsonl(lines(EXAMPLE))
    assert row.state == "my card was charged twice"
    assert row.question == decisions.Question(
        "queue", "choice", "which queue", ("billing", "bug", "other")
    )
    assert row.target == (1.0, 0.0, 0.0) and row.gold == 0


def _with(**changes: Any) -> dict[str, Any]:
    return {**EXAMPLE, **changes}


QUESTION = EXAMPLE["questions"]["queue"]  # type: ignore[index]


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        _with(extra=1),
        _with(state=""),
        _with(questions={}),
        _with(questions={"queue": QUESTION, "other": QUESTION}),
        _with(questions={"queue": {**QUESTION, "type": "rank"}}),
        _with(questions={"queue": {**QUESTION, "criteria": ["billing", "billing"]}}),
        _with(questions={"queue": {**QUESTION, "type": "noul"}}),
        _with(target={"queue": [0.5, 0.2, 0.2]}),
        _with(target={"queue": [1.5, -0.5, 0]}),
        _with(target={"queue": [1, 0]}),
        _with(target={"other": [1, 0, 0]}),
        _with(target={"queue": [True, 0, 0]}),
        _with(questions={"topic": QUESTION}, target={"topic": [1, 0, 0]}),  # another question
    ],
)
def test_any_other_row_fails_naming_its_line_and_not_its_text(bad: Any) -> None:
    with pytest.raises(DatasetError) as caught:
        decisions.parse_jsonl(lines(EXAMPLE, bad))
    assert caught.value.reason == "TRAINING_DATASET_UNUSABLE"
    assert caught.value.metadata == {"line": "2"}
    assert "charged" not in str(caught.value) and "billing" not in str(caught.value)


def test_the_holdout_is_about_a_fifth_by_state_and_the_same_every_time() -> None:
    rows = decisions.fixture_rows()
    train, holdout = decisions.split(rows)
    assert 0.12 < len(holdout) / len(rows) < 0.28
    assert decisions.split(decisions.fixture_rows()) == (train, holdout)
    assert not {r.state for r in train} & {r.state for r in holdout}


def test_a_snapshot_carries_every_row_exactly_with_its_split() -> None:
    rows = decisions.parse_jsonl(
        lines(
            EXAMPLE,
            _with(state="the app froze", target={"queue": [0.1, 0.8, 0.1]}, group="g1", lang="en"),
        )
    )
    data, sha256 = decisions.snapshot(rows)
    assert decisions.snapshot(rows)[1] == sha256
    read = decisions.read_snapshot(data)
    assert [row for row, _ in read] == rows
    assert [split for _, split in read] == [
        "eval" if decisions.held_out(r.state) else "train" for r in rows
    ]


@pytest.fixture(scope="module")
def service() -> JobCreation:
    catalog = Catalog.discover(None)
    return JobCreation(None, catalog, Config.from_env({}), None)  # type: ignore[arg-type]


def admit(service: JobCreation, **spec: Any) -> Any:
    body = {
        "base_model": "fixture-tiny-decider",
        "dataset": {"uri": "fixture:decisions-tiny-v1"},
        "resources": {"budget": 100},
        **spec,
    }
    return service.admit(Principal("k", "acme", "member"), parse_json_job(body)).job


def refusal(service: JobCreation, **spec: Any) -> tuple[str, dict[str, str]]:
    with pytest.raises(errors.DomainError) as caught:
        admit(service, **spec)
    return caught.value.reason, dict(caught.value.metadata)


def test_a_decision_job_trains_a_readout_capability_holding_out_a_fifth(
    service: JobCreation,
) -> None:
    job = admit(service)
    assert (job.adaptation.mode, job.output.kind) == ("readout", "capability")
    _, holdout = decisions.split(decisions.fixture_rows())
    assert job.eval_examples == len(holdout) and job.train_examples == 360 - len(holdout)


def test_auto_chooses_full_and_says_why_and_protection_gets_its_defaults(
    service: JobCreation,
) -> None:
    job = admit(
        service,
        adaptation={"mode": "auto"},
        objective={"terms": [{"kind": "pairwise_margin", "weight": 1, "margin": 0.5}]},
        protect={"suites": ["sentiment", "topic"], "projection": {}, "distillation": True},
    )
    assert job.adaptation.mode == "full" and "small enough" in job.adaptation.chose
    assert job.protect.projection.strength == 1.0
    assert (job.protect.budget.accuracy, job.protect.budget.ece) == (0.02, 0.03)


@pytest.mark.parametrize(
    ("spec", "reason", "supported"),
    [
        ({"adaptation": {"mode": "lora"}}, "UNSUPPORTED_ADAPTATION", "full,readout,auto"),
        ({"protect": {"suites": ["queue"]}}, "INVALID_REQUEST", "sentiment,topic,spam"),
        (
            {"protect": {"suites": ["topic"], "capabilities": ["a" * 64]}},
            "UNSUPPORTED_PROTECT",
            "suites,projection,distillation",
        ),
        ({"evaluation": {"suites": ["nope"]}}, "UNSUPPORTED_EVALUATION", None),
        ({"output": {"kind": "lora"}}, "UNSUPPORTED_OUTPUT", "checkpoint,capability"),
        (
            {"dataset": {"uri": "fixture:synthetic-tiny-v1"}},
            "INVALID_REQUEST",
            "fixture:decisions-tiny-v1,artifact,s3,hf",
        ),
    ],
)
def test_what_the_decision_base_does_not_run_is_refused_with_what_it_does(
    service: JobCreation, spec: dict[str, Any], reason: str, supported: str | None
) -> None:
    got, metadata = refusal(service, **spec)
    assert got == reason
    if supported is not None:
        assert metadata["supported"] == supported


def test_the_llm_base_still_refuses_what_only_the_decision_base_runs(
    service: JobCreation,
) -> None:
    llm = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}
    assert refusal(service, **llm, adaptation={"mode": "readout"})[0] == "UNSUPPORTED_ADAPTATION"
    assert refusal(service, **llm, protect={"suites": ["topic"]})[0] == "UNSUPPORTED_PROTECT"
    assert (
        refusal(service, **llm, objective={"terms": [{"kind": "consistency", "weight": 1}]})[0]
        == "UNSUPPORTED_OBJECTIVE"
    )
