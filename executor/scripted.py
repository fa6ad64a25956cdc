"""A scripted trainer: realistic events without a model, for exercising the executor wire
(leases, reports, cancels, reconnects) quickly. `python -m executor.scripted task.json`.

It steps through the job's planned steps with a falling loss, saves a small output
directory, and stops cooperatively on SIGTERM. `SCRIPTED_STEP_SECONDS` sets its pace and
`SCRIPTED_START_SECONDS` how long it takes to start.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from executor.protocol import emit


def main(task_file: str) -> int:
    spec = json.loads(Path(task_file).read_text())
    job, task = spec["job"], spec["task"]
    pace = float(os.environ.get("SCRIPTED_STEP_SECONDS", "0.05"))
    stop = {"asked": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(asked=True))
    emit(type="status", status="accepted")
    if task.get("role") == "join":
        emit(type="status", status="done")
        return 0
    if int(task.get("world_size", 1)) > 1:
        emit(type="coordinator", addr="127.0.0.1:29500")
    # A real trainer spends seconds importing before its first step (a cold start).
    time.sleep(float(os.environ.get("SCRIPTED_START_SECONDS", "0")))
    emit(type="status", status="running")
    planned = int(job.get("planned_steps") or 1)
    started, step = time.monotonic(), 0
    for step in range(1, planned + 1):
        if stop["asked"]:
            step -= 1
            break
        time.sleep(pace)
        emit(
            type="metric", name="loss", step=step, value=round(3.0 * math.exp(-step / 20) + 0.1, 5)
        )
        emit(type="metric", name="learning_rate", step=step, value=1e-3)
    if step == 0:
        emit(type="status", status="cancelled")
        return 0
    out = Path(spec["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "weights.txt").write_text(f"scripted weights of {job['id']} at step {step}\n")
    emit(type="status", status="finalizing")
    emit(type="output", path=str(out), step=step)
    stop_reason = (
        "cancelled"
        if stop["asked"]
        else ("max_steps" if job.get("hyperparameters", {}).get("max_steps") else "completed")
    )
    emit(
        type="result",
        step=step,
        served_step=step,
        checkpoint_step=step,
        training_seconds=round(time.monotonic() - started, 3),
        base_sha256="0" * 64,
        outcome={"stop_reason": stop_reason, "downgrades": []},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
