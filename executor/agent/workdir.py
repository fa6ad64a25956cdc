"""A task's or a client's work directory under the executor's work root: what a failed
one keeps for diagnosis, the sweep of what no one holds, and the environment a trainer
runs in there."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from executor.wire.protocol import TASK_FILE
from trainyard.private import without_secrets

# What a failed task's directory keeps for diagnosis: the org's data in it (its dataset
# rows, inputs, outputs) goes as the task ends, like a finished task's whole directory.
DIAGNOSIS = frozenset({"trainer.log", TASK_FILE})


# The directories of tasks and clients under an executor's work root.
WORK_PREFIXES = ("tsk_", "cli_")


def discard(work: Path, *, failed: bool) -> None:
    """Remove a task's work directory; of a failed one, all but what diagnoses it."""
    if not failed:
        shutil.rmtree(work, ignore_errors=True)
        return
    with contextlib.suppress(FileNotFoundError):
        for entry in work.iterdir():
            if entry.name in DIAGNOSIS:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def sweep(root: Path, older_than: float, held: set[str]) -> int:
    """Remove the task and client directories under `root` that no one holds and that
    have not changed for `older_than` seconds (a failed task's, or one an executor that
    crashed left); how many went."""
    removed = 0
    cutoff = time.time() - older_than
    with contextlib.suppress(FileNotFoundError):
        for work in root.iterdir():
            if not work.name.startswith(WORK_PREFIXES) or work.name in held:
                continue
            try:
                changed = max(p.lstat().st_mtime for p in [work, *work.iterdir()])
            except OSError:  # not a directory, or gone meanwhile
                continue
            if changed < cutoff:
                shutil.rmtree(work, ignore_errors=True)
                removed += 1
    return removed


def trainer_env(work_root: Path, task_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a trainer runs in: the executor's less its key and any other
    credential (a trainer runs code and data an org chose), with DeepSpeed's built ops kept
    under the work root (built once, not once per task), and the task's own variables."""
    env = {**without_secrets(os.environ), **(task_env or {})}
    env.setdefault("TORCH_EXTENSIONS_DIR", str(work_root / "torch_extensions"))
    return env
