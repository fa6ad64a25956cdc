"""A metric series cut to fit a chart: at most N points that keep its shape and spikes;
and which attempt's points make the curve a job trained."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")

MIN_POINTS = 5
MAX_POINTS = 100_000


def downsample(points: Sequence[T], max_points: int, value: Callable[[T], float]) -> list[T]:
    """At most `max_points` of `points`, in their order: the first and the last, and from
    each of the equal buckets the rest is cut into, its lowest, highest and last point.
    (Largest-triangle methods draw smoother lines but can drop a lone spike; min/max
    keeps every extreme, which is what a loss chart is read for.)"""
    if max_points < MIN_POINTS:
        raise ValueError(f"max_points must be at least {MIN_POINTS}")
    if len(points) <= max_points:
        return list(points)
    middle = range(1, len(points) - 1)
    buckets = (max_points - 2) // 3
    kept = [0]
    for b in range(buckets):
        bucket = middle[b * len(middle) // buckets : (b + 1) * len(middle) // buckets]
        lowest = min(bucket, key=lambda i: value(points[i]))
        highest = max(bucket, key=lambda i: value(points[i]))
        kept.extend(sorted({lowest, highest, bucket[-1]}))
    kept.append(len(points) - 1)
    return [points[i] for i in kept]


def trained_steps(
    reported: Iterable[int], resumed_at: Mapping[int, int]
) -> dict[int, tuple[int, float]]:
    """The steps each attempt's points stand for in the curve the job trained, as
    `{attempt: (after, through)}`: the newest attempt that reported a point owns its steps
    after the step it resumed from (all of them when it started over); below that, the
    attempt before it, and so on down. An attempt that started over hides every earlier
    point, and one resumed from an older checkpoint hides what an attempt between trained
    past it. `reported`: the attempts with points; `resumed_at`: each resumed attempt's
    checkpoint step."""
    windows: dict[int, tuple[int, float]] = {}
    through: float = math.inf
    for attempt in sorted(set(reported), reverse=True):
        after = resumed_at.get(attempt, 0)
        if after < through:
            windows[attempt] = (after, through)
        through = min(through, after)
        if through <= 0:
            break
    return windows
