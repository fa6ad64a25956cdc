"""Downsampling a metric series for a chart: bounded, ordered, shape and spikes kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.jobs.series import MIN_POINTS, downsample

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
