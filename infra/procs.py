"""Child processes with prefixed, multiplexed logs and a stop that always ends them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO


class Output:
    """Where every child's lines go, each prefixed with its name; safe across threads."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def line(self, name: str, text: str) -> None:
        with self._lock:
            self._stream.write(f"{name:<9} | {text.rstrip()}\n")
            self._stream.flush()


class Child:
    """One supervised process: started in its own process group, its output pumped to
    `Output` by a thread, stopped with SIGTERM and then SIGKILL after a grace."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        out: Output,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self._out = out
        self.proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self._pump = threading.Thread(target=self._read, name=f"log-{name}", daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._out.line(self.name, line)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL the whole group."""
        if self.alive:
            self._signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.alive and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.alive:
                self._signal(signal.SIGKILL)
        code = self.proc.wait()
        self._pump.join(timeout=2)
        return code

    def kill(self) -> None:
        """SIGKILL at once, as a crash would end it."""
        self._signal(signal.SIGKILL)
        self.proc.wait()

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
