"""Meters and their rates (HIP-1333 §10): every rate is a row the operator sets, with a
compiled floor when there is none. Money is integer micro-cents (10⁻⁶ US cents); a price
is floored to the micro-cent, and a task's charges are cumulative (what the clock metered
so far, priced, less what was charged), so rounding never drifts."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.money.tables import RateRow

MICRO_CENTS_PER_CENT = 1_000_000
# The compiled floors, in micro-cents per unit: $3.48 a GPU-hour (an H100), $0.08 a
# CPU-hour, $0.02 a GB-month, $0.18 an engine-hour.
GPU_HOUR = 348 * MICRO_CENTS_PER_CENT
CPU_HOUR = 8 * MICRO_CENTS_PER_CENT
STORAGE = "storage-gb-month"
STORAGE_GB_MONTH = 2 * MICRO_CENTS_PER_CENT
CLIENT = "client-second"
CLIENT_SECOND = 18 * MICRO_CENTS_PER_CENT // 3600


def compute_meter(base: str, device: str) -> str:
    """The meter of a device-hour of `base` on `device` (`cpu`, else an accelerator)."""
    return f"{base}-{'cpu' if device == 'cpu' else 'gpu'}-hour"


def meters(bases: Iterable[str]) -> list[str]:
    """Every meter of the deployment: each base's two compute meters, storage, clients."""
    found = [compute_meter(b, d) for b in sorted(bases) for d in ("cuda", "cpu")]
    return [*found, STORAGE, CLIENT]


def floor(meter: str) -> int:
    if meter.endswith("-gpu-hour"):
        return GPU_HOUR
    if meter.endswith("-cpu-hour"):
        return CPU_HOUR
    return {STORAGE: STORAGE_GB_MONTH, CLIENT: CLIENT_SECOND}[meter]


def unit(meter: str) -> str:
    """What one unit of the meter is."""
    return {STORAGE: "gb-month", CLIENT: "engine-second"}.get(meter, "device-hour")


def rate(session: Session, meter: str) -> tuple[int, bool]:
    """The meter's rate in micro-cents per unit, and whether it is the compiled floor."""
    set_ = session.scalar(sa.select(RateRow.micro_cents).where(RateRow.meter == meter))
    return (floor(meter), True) if set_ is None else (set_, False)


def cost(seconds: int, per_hour: int) -> int:
    """The price of `seconds` at a rate per hour, floored to the micro-cent."""
    return seconds * per_hour // 3600


def seconds_for(micro_cents: int, per_hour: int) -> int:
    """The most seconds `micro_cents` pays for at a rate per hour."""
    return max(micro_cents, 0) * 3600 // per_hour if per_hour > 0 else 2**62
