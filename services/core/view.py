"""How a job reads: the stored rows turned into the `Job` every answer carries. Shared by
the services that answer with a job (JobService, and ClaimService's assignments);
JobService adds the preview of the rows it trained on."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from google.protobuf import json_format, timestamp_pb2
from sqlalchemy.orm import Session

from services.core.money.rates import cost
from services.core.money.tables import HoldRow, holds_read
from services.core.object_tables import ObjectRow, readable
from services.core.states import HoldStatus
from services.core.store import utcnow
from services.core.tables import AttemptRow, JobRow, attempts_read
from trainyard.job.v1 import job_pb2


def ts(value: dt.datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _seconds(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return round((end - start).total_seconds(), 3)


def job_proto(session: Session, row: JobRow) -> job_pb2.Job:
    return job_protos(session, [row])[0]


def job_protos(session: Session, rows: Sequence[JobRow]) -> list[job_pb2.Job]:
    """The jobs as read; what each reads beside its row (its attempt, holds and output)
    is read for all of them at once, so a page costs a few queries, not a few a job."""
    ids = [row.id for row in rows]
    current = {row.id: row.attempt_count for row in rows}
    known = attempts_read(session)
    attempts = {
        r.id: known[r.id, r.attempt_count] for r in rows if (r.id, r.attempt_count) in known
    }
    if unread := [job_id for job_id in ids if job_id not in attempts]:
        query = sa.select(AttemptRow).where(AttemptRow.job_id.in_(unread))
        for a in session.scalars(query):
            if a.attempt_number == current[a.job_id]:
                attempts[a.job_id] = a
    known_holds = holds_read(session)
    holds = {job_id: list(known_holds.get(job_id, ())) for job_id in ids}
    if unread := [job_id for job_id in ids if job_id not in known_holds]:
        for hold in session.scalars(sa.select(HoldRow).where(HoldRow.job_id.in_(unread))):
            holds[hold.job_id].append(hold)
    outputs = {(row.org, str(row.result.get("sha256", ""))) for row in rows if row.result}
    for org in {org for org, _ in outputs}:
        # Loaded into the session's identity map, where each job's `session.get` finds it.
        shas = [sha for o, sha in outputs if o == org and sha]
        session.scalars(
            sa.select(ObjectRow).where(ObjectRow.org == org, ObjectRow.sha256.in_(shas))
        ).all()
    return [_job(session, row, attempts.get(row.id), holds[row.id]) for row in rows]


def _job(
    session: Session, row: JobRow, attempt: AttemptRow | None, holds: list[HoldRow]
) -> job_pb2.Job:
    job = row.frozen()
    job.id, job.number, job.status = row.id, row.number, row.status
    job.project = row.project
    plan = row.planned()
    job.planned_steps, job.steps_per_epoch = plan.planned_steps, plan.steps_per_epoch
    job.effective_batch_size = plan.effective_batch_size
    job.train_examples, job.eval_examples = plan.train_examples, plan.eval_examples
    if row.preparation:
        prep = {k: v for k, v in row.preparation.items() if k != "snapshot_time"}
        json_format.ParseDict(prep, job.preparation, ignore_unknown_fields=True)
        if row.snapshot_time:
            job.preparation.snapshot_time.CopyFrom(ts(row.snapshot_time))
    for name in ("progress", "outcome"):
        if (block := getattr(row, name)) is not None:
            json_format.ParseDict(block, getattr(job, name), ignore_unknown_fields=True)
    if row.evaluation is not None:
        json_format.ParseDict(row.evaluation, job.evaluation, ignore_unknown_fields=True)
    # A block with nothing in it did not apply, or never ran: it reads null, not zeros (002).
    for name in ("evaluation", "outcome", "preparation"):
        if job.HasField(name) and not getattr(job, name).ListFields():
            job.ClearField(name)
    if row.result is not None and _result_readable(session, row):
        json_format.ParseDict(row.result, job.result, ignore_unknown_fields=True)
        if job.result.sha256 and not job.result.size:
            # A result recorded before reports carried the output's size: its object's.
            output = session.get(ObjectRow, (row.org, job.result.sha256))
            job.result.size = output.size if output is not None else 0
        job.model_available = row.model_available
    job.failure_code, job.failure_category = row.failure_code, row.failure_category
    job.failure_message = row.failure_message
    job.attempt_count = row.attempt_count
    job.deleted = row.deleted
    job.key_id = row.key_id
    job.create_time.CopyFrom(ts(row.create_time))
    job.update_time.CopyFrom(ts(row.update_time))
    _timing(row, attempt, job.timing)
    _money(holds, job)
    return job


def _money(holds: list[HoldRow], job: job_pb2.Job) -> None:
    """What the job was metered and charged, every attempt, and what it holds now. The
    holds carry each charge beside the ledger entry made in the same transaction, so their
    sum is the ledger's."""
    for hold in holds:
        job.timing.metered_device_seconds += hold.used_seconds
        if hold.charged:
            job.timing.charged_device_seconds += hold.used_seconds
            job.cost_micro_cents += hold.charged_micro_cents
        if hold.status == HoldStatus.LIVE:
            job.holding.device_seconds += hold.held_seconds - hold.used_seconds
            if hold.charged:
                job.holding.micro_cents += (
                    cost(hold.held_seconds, hold.rate) - hold.charged_micro_cents
                )
    # The same charge in US cents, the unit of the job's budget.
    job.cost_credits = job.cost_micro_cents / 1_000_000


def _result_readable(session: Session, row: JobRow) -> bool:
    """Whether the job's output can still be downloaded: its retention is evaluated on
    every read, so an expired output reads as gone before the sweep deletes it."""
    sha256 = str((row.result or {}).get("sha256", ""))
    return not sha256 or readable(session, session.get(ObjectRow, (row.org, sha256)), utcnow())


def _timing(row: JobRow, attempt: AttemptRow | None, timing: job_pb2.Timing) -> None:
    timing.attempt_count = row.attempt_count
    if (total := _seconds(row.create_time, row.end_time)) is not None:
        timing.total_seconds = total
    preparing = _seconds(row.preparing_time, row.snapshot_time)
    if preparing is not None and row.attempt_count == 1:
        timing.preparing_seconds = preparing
    if attempt is None:
        return
    waited = _seconds(attempt.create_time, attempt.leased_time)
    if waited is not None:
        timing.queued_seconds = max(
            0.0, waited - (preparing or 0.0 if row.attempt_count == 1 else 0.0)
        )
    if attempt.training_seconds is not None:
        timing.training_seconds = attempt.training_seconds
    elif (training := _seconds(attempt.started_time, attempt.finalizing_time)) is not None:
        timing.training_seconds = training
    if (final := _seconds(attempt.finalizing_time, attempt.end_time)) is not None:
        timing.finalizing_seconds = final
