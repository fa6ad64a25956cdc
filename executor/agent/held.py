"""The leases an executor process holds, kept on disk beside its tasks' work, so the
process started after it ended (a crash, a kill, a reboot) names them in its hello and the
claim service ends those tasks at once instead of when their leases lapse.

Each process holds one slot file under an exclusive lock for its life; a process starting
takes the first slot no live process holds, which is the one a process that ended left.
Two executors sharing a work directory therefore never read each other's leases."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO

SLOTS = 64


class HeldLeases:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock: IO[str] | None = None
        for slot in range(SLOTS):
            lock = (directory / f"held-{slot}.lock").open("a")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            self._lock, self._path = lock, directory / f"held-{slot}.json"
            break
        # With every slot held, nothing is kept: leases lapse as they always did.

    def read(self) -> list[tuple[str, str]]:
        """What the process that had this slot held when it ended; nothing when it ended
        cleanly, or the file is unreadable."""
        if self._lock is None:
            return []
        try:
            found = json.loads(self._path.read_text())
            return [(str(task), str(lease)) for task, lease in found]
        except (OSError, ValueError, TypeError):
            return []

    def write(self, leases: Iterable[tuple[str, str]]) -> None:
        """Keep `leases` (task id, lease token) as what this process holds, replaced whole."""
        if self._lock is None:
            return
        scratch = self._path.with_suffix(".tmp")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(sorted(leases), fh)
        os.replace(scratch, self._path)
