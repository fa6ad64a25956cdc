"""How long an object is kept. Retention classes bound a job's TTL; a job's outputs keep
what the `retention` of its frozen spec asks, and an upload of the org's keeps the
deployment's default. An object is stored with the time it expires; retention is
evaluated on read (an expired object answers as unknown) and ArtifactService's sweep
deletes it later."""

from __future__ import annotations

import dataclasses
import datetime as dt

from services.core.tables import JobRow

HOUR = 3600
DAY = 24 * HOUR

# class → (least TTL, greatest TTL, default TTL), in seconds.
CLASSES: dict[str, tuple[int, int, int]] = {
    "ephemeral": (HOUR, 7 * DAY, DAY),
    "standard": (DAY, 90 * DAY, 30 * DAY),
    "extended": (30 * DAY, 3650 * DAY, 365 * DAY),
}
DEFAULT_CLASS = "standard"


@dataclasses.dataclass(frozen=True)
class Retention:
    policy: str
    ttl_seconds: int | None


DEFAULT = Retention("default", None)


def of_job(job: JobRow) -> Retention:
    """What the job's outputs keep: the class and TTL it was frozen with."""
    asked = job.frozen().retention
    return Retention(
        asked.policy_class or "standard",
        asked.ttl_seconds if asked.HasField("ttl_seconds") else None,
    )


def expiry(retention: Retention, stored: dt.datetime, default_days: int) -> dt.datetime | None:
    """When bytes stored at `stored` expire: after the TTL asked, else after the
    deployment's default days; never when those are 0."""
    if retention.ttl_seconds is not None:
        return stored + dt.timedelta(seconds=retention.ttl_seconds)
    if default_days > 0:
        return stored + dt.timedelta(days=default_days)
    return None
