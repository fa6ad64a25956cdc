"""A scripted trainer: realistic events without a model, for exercising the executor wire
(leases, reports, cancels, reconnects) quickly. `python -m executor.scripted task.json`.

It steps through the job's planned steps with a falling loss, saves a small output
directory, and stops cooperatively on SIGTERM. `SCRIPTED_STEP_SECONDS` sets its pace and
`SCRIPTED_START_SECONDS` how long it takes to start; `SCRIPTED_CRASH_AT_STEP` makes it die
of an uncaught exception at that step, as a trainer that crashes does, once the file
`SCRIPTED_CRASH_AFTER` names exists when it names one. Each step writes a line on stderr,
as a real trainer's loop does. It supports nothing of its own: an executor
that runs it declares what its other trainers support.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import ClassVar

from executor.trainers.base import Emit, Stop, Supports
from executor.wire.plan import Plan
from executor.wire.protocol import Output
from trainyard.job.v1 import job_pb2
from trainyard.training import events


class ScriptedTrainer:
    name: ClassVar[str] = "scripted"
    supports: ClassVar[Supports] = Supports()

    def run(self, plan: Plan, emit: Emit) -> int:
        stop = Stop.on_sigterm()
        pace = float(os.environ.get("SCRIPTED_STEP_SECONDS", "0.05"))
        emit(events.Status("accepted"))
        if plan.task.role == "join":
            emit(events.Status("done"))
            return 0
        if plan.task.world_size > 1:
            emit(events.Coordinator("127.0.0.1:29500"))
        # A real trainer spends seconds importing before its first step (a cold start).
        time.sleep(float(os.environ.get("SCRIPTED_START_SECONDS", "0")))
        emit(events.Status("running"))
        planned = plan.job.planned_steps or 1
        crash_at = int(os.environ.get("SCRIPTED_CRASH_AT_STEP", "0"))
        started, step = time.monotonic(), 0
        for step in range(1, planned + 1):
            if stop.asked:
                step -= 1
                break
            time.sleep(pace)
            loss = round(3.0 * math.exp(-step / 20) + 0.1, 5)
            print(f"step {step}/{planned} loss {loss}", file=sys.stderr, flush=True)
            if step == crash_at:
                _crash(step, stop)
            emit(events.Metric("loss", step, loss))
            emit(events.Metric("learning_rate", step, 1e-3))
        if step == 0:
            emit(events.Status("cancelled"))
            return 0
        out = plan.output_dir
        out.mkdir(parents=True, exist_ok=True)
        (out / "weights.txt").write_text(f"scripted weights of {plan.job.id} at step {step}\n")
        emit(events.Status("finalizing"))
        emit(Output(out, step))
        stop_reason = "max_steps" if plan.job.hyperparameters.max_steps else "completed"
        if stop.asked:
            stop_reason = "cancelled"
        emit(
            events.Result(
                step=step,
                served_step=step,
                checkpoint_step=step,
                training_seconds=round(time.monotonic() - started, 3),
                base_sha256="0" * 64,
                outcome=job_pb2.Outcome(stop_reason=stop_reason),
            )
        )
        return 0


def _crash(step: int, stop: Stop) -> None:
    """Die of an uncaught exception, once the file `SCRIPTED_CRASH_AFTER` names exists."""
    after = os.environ.get("SCRIPTED_CRASH_AFTER", "")
    while after and not os.path.exists(after) and not stop.asked:
        time.sleep(0.05)
    raise RuntimeError(f"scripted crash at step {step}")
