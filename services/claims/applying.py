"""One event of a report applied to its job, under the task's lease (`Reports._apply`
applies a run of metrics itself): a status through the lifecycle, a log line, a piece of
the attempt's log, an output, the result; with what ArtifactService made of the report's
outputs before (`Effects`)."""

from __future__ import annotations

import dataclasses

from google.protobuf import json_format
from sqlalchemy.orm import Session

from services.core import attempt_logs, lifecycle
from services.core.states import JobStatus
from services.core.tables import AttemptRow, JobRow, TaskRow
from trainyard.training.events import (
    Artifact,
    Coordinator,
    Event,
    Log,
    Result,
    Status,
    Stdio,
)


@dataclasses.dataclass
class Effects:
    """What ArtifactService made of a report's outputs before it is applied."""

    # The provenance record of each finished run's output, by its sha256.
    provenance: dict[str, str] = dataclasses.field(default_factory=dict)
    # Outputs that did not read back as uploaded (deleted by ArtifactService).
    refused: set[str] = dataclasses.field(default_factory=set)
    # The size each output read back at, by its sha256.
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)

    def refuses(self, event: Event) -> bool:
        match event:
            case Artifact(sha256=sha256) | Result(sha256=sha256):
                return sha256 in self.refused
        return False


def apply_event(
    session: Session,
    task: TaskRow,
    job: JobRow,
    attempt: AttemptRow,
    event: Event,
    effects: Effects,
    max_events: int,
) -> None:
    """Apply one event (a metric is applied with its run, in `_metrics`); a log line past
    the job's `max_events` is dropped."""
    match event:
        case Status(status=status, error=error):
            lifecycle.report_status(session, job, task, attempt, status, error)
        case Coordinator(addr=addr):
            lifecycle.coordinate(session, job, task, addr)
        case Log(line=line):
            if job.event_seq < max_events:
                lifecycle.append_event(
                    session, job, "log", attempt=attempt.attempt_number, line=line
                )
        case Stdio(text=text):
            # The lead's trainer is the attempt's; a join's output stays on its machine.
            if task.role == "lead":
                attempt_logs.append(session, job, attempt.attempt_number, text)
        case Artifact(sha256=sha256):
            lifecycle.append_event(
                session, job, "artifact", attempt=attempt.attempt_number, sha256=sha256
            )
        case Result():
            _result(session, job, attempt, event, effects)


def _result(
    session: Session,
    job: JobRow,
    attempt: AttemptRow,
    result: Result,
    effects: Effects,
) -> None:
    """The run's result on the job, and the job's end: cancelled when a cancel was asked,
    rejected past its regression budget, else succeeded."""
    output = job.frozen().output
    if result.sha256:
        job.result = {
            "sha256": result.sha256,
            "kind": output.kind,
            "name": output.name,
            # As the output read back, confirmed before the report was applied.
            "size": effects.sizes.get(result.sha256, 0),
            "base_sha256": result.base_sha256,
            "provenance_record_id": effects.provenance.get(result.sha256, ""),
            "step": result.served_step or result.step,
            "checkpoint_sha256": result.checkpoint_sha256,
            "checkpoint_step": result.checkpoint_step or result.step,
        }
        job.model_available = True
    if result.evaluation is not None:
        job.evaluation = json_format.MessageToDict(
            result.evaluation, preserving_proto_field_name=True
        )
    if result.outcome is not None:
        outcome = json_format.MessageToDict(result.outcome, preserving_proto_field_name=True)
        planned_downgrades = list(job.planned().downgrades)
        outcome["downgrades"] = list(
            dict.fromkeys([*planned_downgrades, *outcome.get("downgrades", [])])
        )
        job.outcome = outcome
    if result.training_seconds:
        attempt.training_seconds = result.training_seconds
    lifecycle.append_event(
        session, job, "result", attempt=attempt.attempt_number, sha256=result.sha256 or None
    )
    if job.status == JobStatus.CANCELLING:
        lifecycle.finish(session, job, attempt, JobStatus.CANCELLED)
    elif (job.evaluation or {}).get("verdict") == "rejected":
        lifecycle.finish(session, job, attempt, JobStatus.REJECTED)
    else:
        lifecycle.finish(session, job, attempt, JobStatus.SUCCEEDED)
