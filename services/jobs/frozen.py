"""The job as a create freezes it on its row, and the one way JobService reads it back.

`JobRow.spec` is the proto JSON (field names as in the proto) of the expanded
`trainyard.job.v1.Job` without its plan fields; `JobRow.plan` is the `planning.Plan` with
the projected duration. Both are written once, by the create, and never change.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from services.core.tables import SPEC_LABELS
from trainyard.job.v1 import job_pb2
from trainyard.training import planning

_PROTO_JSON = {"preserving_proto_field_name": True}
# The plan's figures a job carries in its own fields; the view reads them from `plan`.
_PLAN_FIELDS = (
    "planned_steps",
    "steps_per_epoch",
    "effective_batch_size",
    "train_examples",
    "eval_examples",
)


# -- written by the create ------------------------------------------------------------------


def apply_plan(job: job_pb2.Job, plan: planning.Plan) -> None:
    """Show the plan on the expanded job, as a create answers and a read shows it."""
    for name in _PLAN_FIELDS:
        setattr(job, name, getattr(plan, name))


def _spec_only(job: job_pb2.Job) -> job_pb2.Job:
    """The frozen spec without the plan."""
    out = job_pb2.Job()
    out.CopyFrom(job)
    for name in _PLAN_FIELDS:
        out.ClearField(name)  # type: ignore[arg-type]
    return out


def training_config(job: job_pb2.Job) -> job_pb2.Job:
    """What the training config hash of provenance covers: the spec minus its labels."""
    out = _spec_only(job)
    for name in SPEC_LABELS:
        out.ClearField(name)  # type: ignore[arg-type]
    return out


def spec_json(job: job_pb2.Job) -> dict[str, Any]:
    """What `JobRow.spec` holds."""
    return json_format.MessageToDict(_spec_only(job), **_PROTO_JSON)  # type: ignore[arg-type]
