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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import json_format

from trainyard.job.v1 import job_pb2
from trainyard.training import events

TASK_FILE = "task.json"
M = TypeVar("M", job_pb2.Evaluation, job_pb2.Outcome)


def emit(event: events.Event | Output | State) -> None:
    """Write one event on stdout, the line `read` turns back into it."""
    sys.stdout.write(write(event) + "\n")
    sys.stdout.flush()


def write(event: events.Event | Output | State) -> str:
    """One event as a trainer line. An empty text field is left out (it reads back as
    empty); a result's evaluation and outcome are written in full, null when absent."""
    doc: dict[str, Any] = {"type": _TYPES.get(type(event), getattr(event, "type", ""))}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if field.name == "seq" or value == "":
            continue
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, job_pb2.Evaluation | job_pb2.Outcome):
            value = json_format.MessageToDict(
                value, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            )
        doc[field.name] = value
    return json.dumps(doc, separators=(",", ":"))


def evaluation_block(
    evals: Sequence[tuple[int, float]],
    best_loss: float | None,
    best_step: int | None,
    served_step: int,
) -> dict[str, Any] | None:
    """002's `evaluation` block from a run's evaluations (`(step, loss)` pairs, in order)
    and its best: None for a run that never evaluated."""
    if not evals:
        return None
    last_step, last_loss = evals[-1]
    return {
        "best_loss": best_loss,
        "best_step": best_step,
        "last_loss": last_loss,
        "last_step": last_step,
        "evaluations": len(evals),
        "served_step": served_step,
        "promoted_before_last_eval": served_step != last_step,
    }


def evaluation(block: dict[str, Any] | None) -> job_pb2.Evaluation | None:
    """The wire's Evaluation for a block as a trainer writes it (None for none)."""
    return _message(block, job_pb2.Evaluation())


def end(
    state_dir: Path,
    output_dir: Path,
    *,
    base_sha256: str,
    step: int,
    served_step: int,
    dataset_sha256: str,
    training_seconds: float,
    evaluated: dict[str, Any] | None,
    stop_reason: str,
) -> None:
    """A finished run's last words: the state to resume from, the output, and the result
    (whose `checkpoint_step` is its step: the state is saved where the run stopped)."""
    emit(State(state_dir, step))
    emit(Output(output_dir, served_step))
    emit(
        events.Result(
            base_sha256=base_sha256,
            step=step,
            served_step=served_step,
            checkpoint_step=step,
            dataset_sha256=dataset_sha256,
            training_seconds=round(training_seconds, 3),
            evaluation=evaluation(evaluated),
            outcome=job_pb2.Outcome(stop_reason=stop_reason),
        )
    )


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


_TYPES: dict[type, str] = {Output: "output", State: "state"}


def is_message(line: str) -> bool:
    """Whether a trainer line is one of the protocol's (a JSON object), not output."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


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
