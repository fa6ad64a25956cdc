"""A trainer started ahead of its task, so a task does not wait for its imports.

    python -m executor.wire.warm <trainer module>

The process imports what the trainer needs (torch, DeepSpeed, transformers, peft for
`executor.train`, whose trainers import them inside their functions), then reads one JSON line on
stdin that hands it a task:

    {"argv": ["task.json"], "cwd": "...", "env": {...}, "stderr": ".../trainer.log"}

It takes the task's working directory and environment (in full, as a cold start would get
them, before anything asks CUDA which devices it sees), sends its stderr to the task's log
and runs the trainer module as `__main__` with that argv: from there on it is the process
`python -m <trainer> task.json` would be, with the same stdout protocol. If stdin ends
before a task comes (the executor went away) it exits 0 at once, so it never outlives the
executor that started it.

The trainer module's `PRELOAD` also names what its calls import on first use, and on a
CPU build of torch the process probes which DeepSpeed ops this machine could build (it
compiles test programs), so a task's first step waits for neither.

What stays cold: the task's own work (its inputs, building the model, `init_distributed`,
`deepspeed.initialize`); any DeepSpeed op built on first use (cached across tasks under
`TORCH_EXTENSIONS_DIR`, which the runner puts under the executor's work root, so it is
built once); on a torch built for accelerators, the import of DeepSpeed itself (it picks
its accelerator on import by asking CUDA, which would fix the visible devices before the
task's `CUDA_VISIBLE_DEVICES` applied); and a whole task whose environment differs in what
Python or the loader read only at start (`PYTHON*`, `LD_*`), which starts cold.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import queue
import runpy
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

# Read only when a process starts: a task that sets them otherwise starts cold.
AT_START = ("PYTHON", "LD_")


def preload(trainer: str) -> None:
    """Import the trainer module and what it names in `PRELOAD`: what it imports inside
    its functions that is worth importing ahead."""
    module = importlib.import_module(trainer)
    for name in getattr(module, "PRELOAD", ()):
        if name == "deepspeed":
            import torch

            if torch.version.cuda or torch.version.hip or getattr(torch.version, "xpu", None):
                continue  # its import would ask the devices before the task names them
            os.environ.setdefault("DS_ACCELERATOR", "cpu")  # what its trainer would pick
        importlib.import_module(name)
        if name == "deepspeed":
            # Which of its ops this machine could build: probed on first read by
            # compiling test programs (a tenth of a second or more), the same for every
            # task.
            importlib.import_module("deepspeed.ops").__compatible_ops__  # noqa: B018


def _wait_for_task(handed: queue.Queue[str]) -> None:
    line = sys.stdin.readline()
    if not line:
        os._exit(0)  # the executor went away: nothing will come
    handed.put(line)


def main(trainer: str) -> None:
    handed: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_wait_for_task, args=(handed,), daemon=True).start()
    # What the imports print goes to this process's log, not to the task's events.
    events = os.dup(1)
    os.dup2(2, 1)
    preload(trainer)
    print(f"executor.wire.warm: {trainer} ready (pid {os.getpid()})", file=sys.stderr, flush=True)
    task = json.loads(handed.get())
    os.chdir(task["cwd"])
    os.environ.clear()
    os.environ.update(task["env"])
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(events, 1)
    os.close(events)
    stderr = os.open(task["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(stderr, 2)
    os.close(stderr)
    # As `python -m` would: the working directory first on the path, the module fresh.
    if not sys.flags.safe_path:
        sys.path[0] = task["cwd"]
    sys.modules.pop(trainer, None)
    sys.argv = [trainer, *task["argv"]]
    runpy.run_module(trainer, run_name="__main__", alter_sys=True)


class WarmTrainer:
    """Keeps one warm process ready for `trainer` once started: `take` hands it a task, and
    the next one starts in the background when that task's trainer has exited; a process
    that died is discarded (the task then starts cold). `close` ends the one waiting."""

    def __init__(self, trainer: str, root: Path, env: Mapping[str, str]) -> None:
        self._trainer, self._root, self._env = trainer, root, dict(env)
        self._lock = threading.Lock()
        self._open = False
        self.waiting: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with self._lock:
            self._open = True
        self._refill()

    def _refill(self) -> None:
        with self._lock:
            if not self._open:
                return
        self._root.mkdir(parents=True, exist_ok=True)
        with open(self._root / "warm.log", "a") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "executor.wire.warm", self._trainer],
                cwd=self._root,
                env=self._env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        with self._lock:
            keep = self._open and self.waiting is None
            if keep:
                self.waiting = process
        if not keep:  # closed meanwhile, or one is waiting already
            _end(process)

    def _refill_after(self, process: subprocess.Popen[str]) -> None:
        # Not at once: importing beside a trainer that has begun to train slows its first
        # steps several-fold on a machine of few cores (the imports take seconds of CPU).
        process.wait()
        self._refill()

    def take(
        self, trainer: str, argv: list[str], cwd: Path, env: Mapping[str, str], stderr: Path
    ) -> subprocess.Popen[str] | None:
        """The waiting process (its imports done or under way), running the task; None if
        there is none alive, or it cannot run this task as a cold start would."""
        at_start = [k for k in {*env, *self._env} if k.startswith(AT_START)]
        if trainer != self._trainer or any(env.get(k) != self._env.get(k) for k in at_start):
            return None
        with self._lock:
            process, self.waiting = self.waiting, None
        if process is None:
            return None
        threading.Thread(target=self._refill_after, args=(process,), daemon=True).start()
        task = {"argv": argv, "cwd": str(cwd), "env": dict(env), "stderr": str(stderr)}
        if process.poll() is None:
            assert process.stdin is not None
            with contextlib.suppress(OSError):  # it may die as it is handed the task
                process.stdin.write(json.dumps(task) + "\n")
                process.stdin.close()
                return process
        log.warning("the warm trainer had exited (%s); starting cold", process.poll())
        _end(process)
        return None

    def close(self) -> None:
        with self._lock:
            self._open = False
            process, self.waiting = self.waiting, None
        if process is not None:
            _end(process)


def _end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


if __name__ == "__main__":
    main(sys.argv[1])
