"""Whether an executor's work area can hold one more task: the disk's free space and the
work area's own budget, against what a task needs (its base's size and a margin)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

from trainyard.training.catalog import Base

log = logging.getLogger(__name__)

GiB = 1024**3
# What a task needs beyond its base's size: its dataset, logs, and the packing of outputs.
MARGIN_BYTES = 2 * GiB
# Bytes a parameter takes in fp32, for a base whose weights are not files on this disk.
BYTES_PER_PARAMETER = 4
# The failure a task the work area cannot hold reports, so the job says why.
DISK_FULL = "executor_disk_full"


def base_bytes(base: Base | None) -> int:
    """A base's size: its weight files' for a local base, else its parameters in fp32."""
    if base is None:
        return 0
    if base.path:
        with contextlib.suppress(OSError):
            return sum(p.stat().st_size for p in Path(base.path).glob("*.safetensors"))
    return base.parameters * BYTES_PER_PARAMETER


def used_bytes(root: Path) -> int:
    """What the files under `root` take (what is gone meanwhile counts for nothing)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def room(root: Path, budget: int) -> int:
    """Bytes a new task may still write under `root`: the disk's free space, and under a
    budget (`budget` > 0) what the work area's files leave of it."""
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if budget > 0:
        free = min(free, budget - used_bytes(root))
    return max(0, free)


def shortfall(root: Path, need: int, budget: int) -> int:
    """How many bytes the work area lacks to hold a task that needs `need`; 0 when it can."""
    return max(0, need - room(root, budget))


def refusal(root: Path, need: int, budget: int, base_model: str) -> str:
    """`DISK_FULL` when the work area under `root` cannot hold a task on `base_model` that
    needs `need` bytes (its base's size and the margin), said in the log; else ""."""
    lacking = shortfall(root, need, budget)
    if not lacking:
        return ""
    log.warning(
        "the work area %s lacks %.1f GiB of the %.1f GiB a task on %s needs; refusing it",
        root,
        lacking / GiB,
        need / GiB,
        base_model,
    )
    return DISK_FULL
