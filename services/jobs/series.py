"""A metric series cut to fit a chart: at most N points that keep its shape and spikes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
