"""Retention classes: how long a job's outputs are kept, each with a bounded TTL."""

from __future__ import annotations

HOUR = 3600
DAY = 24 * HOUR

# class → (least TTL, greatest TTL, default TTL), in seconds.
CLASSES: dict[str, tuple[int, int, int]] = {
    "ephemeral": (HOUR, 7 * DAY, DAY),
    "standard": (DAY, 90 * DAY, 30 * DAY),
    "extended": (30 * DAY, 3650 * DAY, 365 * DAY),
}
DEFAULT_CLASS = "standard"
