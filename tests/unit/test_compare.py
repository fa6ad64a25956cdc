"""Comparing jobs on the SDK's side: a frozen config flattened to dotted paths, only the
paths that differ kept with a value per job, a run summed up from its job and series,
and the two tables `trainyard jobs compare` prints."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import json_format

from trainyard import sdk
from trainyard.cli import main
from trainyard.job.v1 import event_pb2, job_pb2
from trainyard.sdk_compare import (
    Comparison,
    checked_ids,
    config_of,
    differences,
    flatten,
    label_of,
)


def job(number: int, lr: float, rank: int | None, **extra: Any) -> job_pb2.Job:
    """A job as read, frozen, with a run's outputs beside its config."""
    read = {
        "id": f"job_{number:016x}",
        "number": number,
        "project": "support",
        "idempotency_key": f"key-{number}",
        "requested_by": "ci",
        "base_model": "fixture-tiny-llm",
        "dataset": {"uri": "fixture:synthetic-tiny-v1", "source_sha256": "ab" * 32},
        "adaptation": {"mode": "lora", "targets": ["q_proj", "v_proj"], "alpha": 16},
        "hyperparameters": {"max_steps": 4, "learning_rate": lr, "warmup_steps": 0},
        "objective": {"loss": "cross_entropy", "terms": [{"kind": "pairwise", "weight": 1.0}]},
        "resources": {"budget": 100, "max_seconds": 3600},
        "evaluation": {"suites": [], "best_loss": 1.5 + lr, "best_step": 4, "evaluations": 1},
        "status": "succeeded",
        "planned_steps": 4,
        "progress": {"step": 4, "loss": 2.0 - lr, "tokens_per_second": 900.0},
        "outcome": {"stop_reason": "max_steps"},
        "cost_micro_cents": "1234",
        **extra,
    }
    if rank is not None:
        read["adaptation"]["rank"] = rank
    return json_format.ParseDict(read, job_pb2.Job())


def series(losses: list[float], per_step: int = 400) -> list[event_pb2.MetricSeries]:
    steps = range(1, len(losses) + 1)
    return [
        event_pb2.MetricSeries(
            name="loss",
            points=[
                event_pb2.MetricPoint(step=s, value=v) for s, v in zip(steps, losses, strict=True)
            ],
        ),
        event_pb2.MetricSeries(
            name="tokens_seen",
            points=[event_pb2.MetricPoint(step=s, value=s * per_step) for s in steps],
        ),
    ]


def test_a_config_flattens_to_dotted_paths_in_its_order() -> None:
    flat = flatten(config_of(job(1, 0.001, 8)))
    assert flat["hyperparameters.learning_rate"] == 0.001
    assert flat["adaptation.rank"] == 8
    assert flat["adaptation.targets"] == ["q_proj", "v_proj"]  # a list of values is one value
    assert flat["objective.terms.0.kind"] == "pairwise"  # a list of objects is numbered
    assert flat["resources.budget"] == 100 and isinstance(flat["resources.budget"], int)
    assert flat["dataset.source_sha256"] == "ab" * 32
    # Fields without presence are there at their zero, as the REST face writes them.
    assert flat["revision"] == "" and flat["dataset.tags"] == []
    assert list(flat)[:3] == ["project", "base_model", "revision"]


def test_a_config_holds_neither_labels_nor_what_the_run_reported() -> None:
    flat = flatten(config_of(job(1, 0.001, 8)))
    assert not {"id", "number", "idempotency_key", "requested_by", "status"} & set(flat)
    assert not [p for p in flat if p.startswith(("progress.", "outcome.", "timing."))]
    # A default output name is the job's own: it would differ in every comparison.
    assert "output.name" not in flatten(
        config_of(job(1, 0.1, 8, output={"kind": "lora", "name": "x-1"}))
    )
    # Of the evaluation block, only what the job asked for.
    assert [p for p in flat if p.startswith("evaluation.")] == ["evaluation.suites"]


def test_only_the_paths_that_differ_are_kept_with_a_value_per_job() -> None:
    configs = [flatten(config_of(j)) for j in (job(1, 0.001, 8), job(2, 0.01, 8), job(3, 0.001, 4))]
    assert differences(configs) == {
        "adaptation.rank": [8, 8, 4],
        "hyperparameters.learning_rate": [0.001, 0.01, 0.001],
    }


def test_a_path_one_job_lacks_differs_and_reads_none_there() -> None:
    assert differences([{"a": 1, "b": 2}, {"a": 1}]) == {"b": [2, None]}
    assert differences([{"a": [1, 2]}, {"a": [1, 2]}]) == {}
    assert differences(
        [flatten(config_of(job(1, 0.1, 8))), flatten(config_of(job(2, 0.1, None)))]
    ) == {"adaptation.rank": [8, None]}


def test_a_run_is_summed_up_from_its_job_and_series() -> None:
    comparison = Comparison.of(
        [(job(1, 0.01, 8), series([3.0, 2.5, 2.7, 2.6])), (job(2, 0.1, 8), [])]
    )
    first, second = comparison.runs
    assert first.label == "#1 support fixture-tiny-llm" == label_of(first.job)
    assert (first.status, first.step, first.planned_steps) == ("succeeded", 4, 4)
    assert first.final_loss == pytest.approx(1.99)
    assert (first.best_loss, first.best_step) == (2.5, 2)
    assert (first.eval_loss, first.eval_step) == (pytest.approx(1.51), 4)
    assert first.tokens_seen == 1600 and first.cost_micro_cents == 1234
    assert first.stop_reason == "max_steps"
    assert first.series["tokens_seen"][-1] == (4, 1600.0)
    # A job that reported nothing yet has no losses and no tokens seen.
    assert (second.best_loss, second.tokens_seen, second.series["loss"]) == (None, None, [])


@pytest.mark.parametrize("ids", [["job_a"], ["job_a", "job_a"], [f"job_{i}" for i in range(7)]])
def test_a_comparison_takes_two_to_six_distinct_jobs(ids: list[str]) -> None:
    with pytest.raises(ValueError):
        checked_ids(ids)


def _cli(monkeypatch: pytest.MonkeyPatch, comparison: Comparison, *args: str) -> str:
    asked: list[tuple[str, ...]] = []

    def compare_jobs(self: sdk.Client, *ids: str) -> Comparison:
        asked.append(ids)
        return comparison

    monkeypatch.setattr(sdk.Client, "compare_jobs", compare_jobs)
    done = CliRunner().invoke(main, ["--url", "http://127.0.0.1:9", "jobs", "compare", *args])
    assert done.exit_code == 0, done.output
    assert asked == [tuple(a for a in args if not a.startswith("--"))]
    return done.output


def test_the_cli_prints_the_differing_config_rows_and_a_row_per_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs = [job(1, 0.001, 8), job(2, 0.01, 4)]
    comparison = Comparison.of([(j, series([3.0, 2.0])) for j in jobs])
    out = _cli(monkeypatch, comparison, jobs[0].id, jobs[1].id)
    lines = out.splitlines()
    (lr,) = [line for line in lines if "hyperparameters.learning_rate" in line]
    assert lr.split()[1:] == ["0.001", "0.01"]
    (rank,) = [line for line in lines if "adaptation.rank" in line]
    assert rank.split()[1:] == ["8", "4"]
    assert "base_model" not in out  # the same in both: not a row
    (row,) = [line for line in lines if jobs[1].id in line]
    for cell in (
        "succeeded",
        "4/4",
        "1.9900",
        "2.0000 @ 2",
        "1.5100 @ 4",
        "800",
        "$0.00001234",
        "max_steps",
    ):
        assert cell in row, cell
    assert "#1 support" in out and "tokens seen" in out


def test_the_cli_shows_every_path_with_all_and_says_when_nothing_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    same = Comparison.of([(job(1, 0.001, 8), []), (job(2, 0.001, 8), [])])
    out = _cli(monkeypatch, same, "job_1", "job_2")
    assert "the same in every job" in out and "base_model" not in out
    assert "—" in out  # no tokens seen yet
    every = _cli(
        monkeypatch,
        Comparison.of([(job(1, 0.001, 8), []), (job(2, 0.01, 8), [])]),
        "--all",
        "a",
        "b",
    )
    assert "base_model" in every and "* hyperparameters.learning_rate" in every
