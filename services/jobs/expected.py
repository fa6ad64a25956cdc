"""What a job will most likely cost: the device class the connected executors that can take
it would run it on, and the step times recent succeeded jobs of its base measured there."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.money import windows
from services.core.offers import Offer
from services.core.states import JobStatus
from services.core.tables import AttemptRow, JobRow, TaskRow
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import Base, Catalog

# How many recent succeeded jobs of the org a measurement reads.
RECENT_JOBS = 20
# ClaimService's executors as it keeps them (it owns and writes the table; this reads it).
EXECUTORS = sa.table(
    "executors",
    sa.column("id", sa.String()),
    sa.column("org", sa.String()),
    sa.column("machine", sa.String()),
    sa.column("platform", sa.Boolean()),
    sa.column("connected", sa.Boolean()),
    sa.column("offer", sa.JSON()),
)


def device_kinds(session: Session, org: str, job: job_pb2.Job, catalog: Catalog) -> set[str]:
    """The device kinds the connected executors that could take `job` would run it on: the
    platform's for a platform job, else the org's on the machines it names."""
    query = sa.select(EXECUTORS.c.offer).where(EXECUTORS.c.connected.is_(True))
    machines = tuple(job.resources.machines)
    if machines:
        query = query.where(EXECUTORS.c.org == org, EXECUTORS.c.machine.in_(machines))
    else:
        query = query.where(EXECUTORS.c.platform.is_(True))
    kinds = {Offer.from_json(offer).device_for(job, catalog) for offer in session.scalars(query)}
    return {kind for kind in kinds if kind is not None}


def device_class(kinds: set[str], job: job_pb2.Job, base: Base) -> str:
    """`cpu` when every connected executor that can take the job runs it on a CPU; with
    none connected, what the job allows decides (`cpu` only when it allows nothing else)."""
    if kinds:
        return "cpu" if kinds == {"cpu"} else "cuda"
    return windows.device_class(tuple(job.resources.devices) or base.devices)


def measured_runs(session: Session, org: str, base: str, device: str) -> list[tuple[float, int]]:
    """(the trainer's seconds, planned steps) of the org's recent succeeded jobs on
    `base` whose lead task ran on `device`'s class."""
    return [(run.training_seconds, run.steps) for run in recent_runs(session, org, base, device)]


@dataclasses.dataclass(frozen=True)
class Run:
    """A recent succeeded run: its trainer's seconds, its steps, and its lead task's
    seconds from claim to end (loading the base, training, saving, uploading)."""

    training_seconds: float
    steps: int
    wall_seconds: float


def recent_runs(session: Session, org: str, base: str, device: str) -> list[Run]:
    """The org's recent succeeded runs on `base` whose lead task ran on `device`'s
    class, newest first."""
    rows = session.execute(
        sa.select(
            JobRow,
            AttemptRow.training_seconds,
            TaskRow.device,
            TaskRow.claim_time,
            AttemptRow.end_time,
        )
        .join(
            AttemptRow,
            sa.and_(
                AttemptRow.job_id == JobRow.id,
                AttemptRow.attempt_number == JobRow.attempt_count,
            ),
        )
        .join(
            TaskRow,
            sa.and_(
                TaskRow.job_id == JobRow.id,
                TaskRow.attempt_number == JobRow.attempt_count,
                TaskRow.position == 0,
            ),
        )
        .where(JobRow.org == org, JobRow.status == JobStatus.SUCCEEDED)
        .order_by(JobRow.create_time.desc())
        .limit(RECENT_JOBS)
    )
    runs = []
    for job, seconds, ran_on, claimed, ended in rows:
        spec = job.spec or {}
        steps = int(job.plan.get("planned_steps", 0))
        if spec.get("base_model") != base or not seconds or not steps:
            continue
        if windows.device_class((ran_on,)) == device:
            wall = (ended - claimed).total_seconds() if claimed and ended else float(seconds)
            runs.append(Run(float(seconds), steps, max(wall, float(seconds))))
    return runs
