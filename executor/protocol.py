"""The contract between the executor and a trainer subprocess.

The executor starts `python -m <trainer> <task.json>` in the task's work directory.
`task.json` holds the job as read, the task, and where to write outputs. The trainer
writes one JSON object per line on stdout:

    {"type": "status", "status": "running"}                 accepted | running | evaluating | finalizing
    {"type": "coordinator", "addr": "host:port"}             a lead that coordinates a world
    {"type": "metric", "name": "loss", "step": 3, "value": 2.1}
    {"type": "log", "line": "…"}
    {"type": "output", "path": "out/", "step": 40}          a directory to pack and upload
    {"type": "state", "path": "state/", "step": 57}         the state a retry may resume from
    {"type": "result", "evaluation": {…}, "outcome": {…}, "step": 57, "served_step": 50,
     "base_sha256": "…", "dataset_sha256": "…", "training_seconds": 31.2,
     "checkpoint_step": 57}
    {"type": "status", "status": "cancelled"}               stopped before anything was trained

`read` turns each line into a typed event for the wire (`trainyard.training.events`), or
into an upload the executor makes (`Output`, `State`); a line that is not JSON is a log
line. SIGTERM asks for a cooperative stop: finish the step, write what was trained, report
it, exit 0. Any other exit without a result is a failed run.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import json_format

from trainyard.job.v1 import job_pb2
from trainyard.training import events

TASK_FILE = "task.json"
M = TypeVar("M", job_pb2.Evaluation, job_pb2.Outcome)


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def evaluation_block(state: dict[str, Any], served_step: int) -> dict[str, Any] | None:
    """002's `evaluation` block from a run's evaluations (`state["evals"]`, `[step, loss]`
    pairs, and its best): None for a run that never evaluated."""
    if not state["evals"]:
        return None
    last_step, last_loss = state["evals"][-1]
    return {
        "best_loss": state["best_loss"], "best_step": state["best_step"], "last_loss": last_loss,
        "last_step": last_step, "evaluations": len(state["evals"]), "served_step": served_step,
        "promoted_before_last_eval": served_step != last_step,
    }  # fmt: skip


def emit_end(state_dir: Path, output_dir: Path, step: int, served_step: int, **result: Any) -> None:
    """A finished run's last words: the state to resume from, the output, and the result."""
    emit(type="state", path=str(state_dir), step=step)
    emit(type="output", path=str(output_dir), step=served_step)
    emit(type="result", step=step, served_step=served_step, checkpoint_step=step, **result)


@dataclasses.dataclass(frozen=True)
class Output:
    """A directory of the run's output to pack and upload."""

    path: Path
    step: int


@dataclasses.dataclass(frozen=True)
class State:
    """A directory of the state the run may resume from, to pack and upload."""

    path: Path
    step: int


def read(line: str) -> events.Event | Output | State | None:
    """What one trainer line says; None for a line of a type the executor does not know.
    A result names no sha256s: the executor adds those of what it uploaded."""
    try:
        event = json.loads(line)
    except ValueError:
        return events.Log.of(line)
    match event.get("type"):
        case "status":
            return events.Status(str(event.get("status", "")), str(event.get("error", "")))
        case "coordinator":
            return events.Coordinator(str(event["addr"]))
        case "metric":
            return events.Metric(str(event["name"]), int(event["step"]), float(event["value"]))
        case "log":
            return events.Log.of(str(event.get("line", "")))
        case "output":
            return Output(Path(event["path"]), int(event.get("step", 0)))
        case "state":
            return State(Path(event["path"]), int(event.get("step", 0)))
        case "result":
            return events.Result(
                base_sha256=str(event.get("base_sha256", "")),
                step=int(event.get("step", 0)),
                served_step=int(event.get("served_step", 0)),
                checkpoint_step=int(event.get("checkpoint_step", 0)),
                dataset_sha256=str(event.get("dataset_sha256", "")),
                training_seconds=float(event.get("training_seconds", 0.0)),
                evaluation=_message(event.get("evaluation"), job_pb2.Evaluation()),
                outcome=_message(event.get("outcome"), job_pb2.Outcome()),
            )
    return None


def _message(data: Any, into: M) -> M | None:
    return None if data is None else json_format.ParseDict(data, into)
