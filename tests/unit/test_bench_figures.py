"""What `make bench` prints of a figure: its runs' median and range, its baseline's, and
the ratio of the medians, in one line and in the table every script adds to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import figures
from bench.figures import Figure, Spread


def claim(**changes: object) -> Figure:
    found = Figure(
        bench="claims",
        name="claim latency (p50)",
        unit="ms",
        runs=[30.0, 20.0, 25.0],
        baseline="bare commit on the same store",
        baseline_unit="ms",
        baseline_runs=[0.5, 0.4, 0.6],
    )
    for key, value in changes.items():
        setattr(found, key, value)
    return found


def test_a_spread_shows_the_median_the_range_and_the_count() -> None:
    assert str(Spread([3.0, 1.0, 2.0])) == "2 (min 1, max 3, n=3)"
    assert str(Spread([1234.5, 10.25])) == "622 (min 10.2, max 1,234, n=2)"


def test_one_run_is_shown_alone() -> None:
    assert str(Spread([0.0123])) == "0.0123"


def test_the_ratio_is_the_figure_over_its_baseline_by_medians() -> None:
    assert claim().ratio == pytest.approx(25.0 / 0.5)
    assert claim().line() == (
        "claim latency (p50): 25.0 (min 20.0, max 30.0, n=3) ms | baseline, bare commit on the "
        "same store: 0.5 (min 0.4, max 0.6, n=3) ms | ratio 50"
    )


def test_a_goal_says_whether_the_median_met_it() -> None:
    assert claim(goal=30.0).verdict == "goal ≤ 30.0: ok"
    assert claim(goal=20.0).verdict == "goal ≤ 20.0: MISSED"
    assert claim(goal=20.0, lower=False).verdict == "goal ≥ 20.0: ok"
    assert (
        claim(goal=20.0, note="10 jobs a run")
        .line()
        .endswith("| goal ≤ 20.0: MISSED; 10 jobs a run")
    )


def test_the_table_has_a_row_a_figure_with_both_spreads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "table.jsonl"
    monkeypatch.setenv(figures.TABLE_ENV, str(path))
    figures.report(claim(goal=20.0))
    figures.report(claim(bench="auth", name="key read", runs=[1.0], baseline_runs=[0.0]))
    capsys.readouterr()
    monkeypatch.setattr("sys.argv", ["bench.figures", str(path)])
    figures.main()
    header, rule, first, second, missed = capsys.readouterr().out.splitlines()
    assert header.split("  ")[0] == "bench" and set(rule) == {"-", " "}
    assert "25.0 ms (20.0–30.0, 3)" in first and "0.5 ms (0.4–0.6, 3)" in first
    assert first.rstrip().endswith("goal ≤ 20.0: MISSED")
    # A baseline of zero has no ratio: it says so rather than dividing.
    assert "1 ms" in second and "nan" in second
    assert missed == "1 goal(s) missed: claims claim latency (p50)"
    assert [json.loads(line)["bench"] for line in path.read_text().splitlines()] == [
        "claims",
        "auth",
    ]


def test_a_job_is_measured_against_the_bare_loop_at_its_own_time() -> None:
    """A machine drifting through the runs: the job's baseline is the bare loop's tokens/s
    where the job ran between the bare runs around it, not their mean."""
    from bench.recipe import Trace
    from bench.training import bare_at

    def run(rate: float, start: float) -> Trace:
        steps = range(1, 6)
        return Trace({}, {s: rate for s in steps}, at={s: start + s for s in steps})

    before, after = run(4000.0, 0.0), run(5000.0, 10.0)
    assert bare_at(before, after, run(4100.0, 2.0)) == pytest.approx(4200.0)
    assert bare_at(before, after, run(4100.0, 60.0)) == pytest.approx(5000.0)  # not beyond
    untimed = Trace({}, {1: 4100.0, 2: 4100.0})
    assert bare_at(before, after, untimed) == pytest.approx(4500.0)
