"""Downsampling a metric series for a chart: bounded, ordered, shape and spikes kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.jobs.series import MIN_POINTS, downsample, trained_steps

values = st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=400)


@given(values, st.integers(MIN_POINTS, 120))
def test_a_cut_series_is_bounded_ordered_and_keeps_ends_and_extremes(
    series: list[float], max_points: int
) -> None:
    points = list(enumerate(series))
    kept = downsample(points, max_points, value=lambda p: p[1])
    assert len(kept) <= max_points
    assert [i for i, _ in kept] == sorted({i for i, _ in kept})  # a subsequence, in order
    if len(points) <= max_points:
        assert kept == points
    else:
        assert kept[0] == points[0] and kept[-1] == points[-1]
        assert min(v for _, v in kept) == min(series) and max(v for _, v in kept) == max(series)


def test_a_lone_spike_in_a_long_series_survives() -> None:
    points = [(step, 1.0 / step) for step in range(1, 100_001)]
    points[61_234] = (61_235, 50.0)
    kept = downsample(points, 500, value=lambda p: p[1])
    assert len(kept) <= 500 and (61_235, 50.0) in kept


def test_fewer_than_five_points_cannot_keep_ends_and_a_bucket() -> None:
    with pytest.raises(ValueError):
        downsample([(1, 1.0)] * 10, 4, value=lambda p: p[1])


def _curve(points: dict[int, list[int]], resumed: dict[int, int]) -> list[tuple[int, int]]:
    """(attempt, step) of each point kept, from each attempt's reported steps."""
    windows = trained_steps(points, resumed)
    return [
        (attempt, step)
        for attempt, steps in sorted(points.items())
        for step in steps
        if attempt in windows and windows[attempt][0] < step <= windows[attempt][1]
    ]


def test_a_resumed_attempt_continues_the_curve_of_the_one_it_resumed() -> None:
    curve = _curve({1: [1, 2, 3], 2: [4, 5, 6]}, {2: 3})
    assert curve == [(1, 1), (1, 2), (1, 3), (2, 4), (2, 5), (2, 6)]


def test_an_attempt_that_starts_over_replaces_every_earlier_point() -> None:
    assert _curve({1: [1, 2, 3, 4, 5], 2: [1, 2]}, {}) == [(2, 1), (2, 2)]


def test_a_resume_from_an_older_checkpoint_hides_what_an_attempt_between_trained() -> None:
    # Attempt 2 resumed at 5 and failed at 8 without saving; attempt 3 resumed at 5 again.
    curve = _curve({1: [1, 2, 3, 4, 5], 2: [6, 7, 8], 3: [6, 7]}, {2: 5, 3: 5})
    assert [s for _, s in curve] == [1, 2, 3, 4, 5, 6, 7]
    assert {a for a, s in curve if s > 5} == {3}


def test_an_attempt_with_no_points_yet_hides_nothing() -> None:
    # Attempt 2 is queued (it reported nothing): the job's curve is still attempt 1's.
    assert _curve({1: [1, 2]}, {}) == [(1, 1), (1, 2)]
    assert trained_steps([], {}) == {}


@given(st.lists(st.tuples(st.booleans(), st.integers(1, 30)), min_size=1, max_size=6))
def test_the_curve_holds_each_step_once_in_order(attempts: list[tuple[bool, int]]) -> None:
    """Each attempt resumes where the one before it stopped, or starts over; the curve
    then has one point a step, steps 1 to where the last attempt stopped."""
    points: dict[int, list[int]] = {}
    resumed: dict[int, int] = {}
    at = 0
    for number, (resume, steps) in enumerate(attempts, start=1):
        start = at if resume else 0
        if resume:
            resumed[number] = at
        points[number] = list(range(start + 1, start + steps + 1))
        at = start + steps
    assert [s for _, s in _curve(points, resumed)] == list(range(1, at + 1))
