"""A job's preparation: taken from the queue, its dataset snapshotted, verified or failed;
its tasks made once the snapshot exists."""

from __future__ import annotations

from sqlalchemy.orm import Session

from services.core.ids import new_id
from services.core.lifecycle.moves import (
    A,
    J,
    P,
    T,
    append_event,
    current_attempt,
    move_attempt,
    move_job,
    move_preparation,
    tasks_of,
)
from services.core.states import (
    INPUT_FAILED,
)
from services.core.store import utcnow
from services.core.tables import JobRow, TaskRow
from services.core.wakeups import claimable_topic, mark

# -- preparation ----------------------------------------------------------------------------


def start_preparation(session: Session, job: JobRow) -> bool:
    """A queued job is taken for preparation, or a stalled one again. True when its
    snapshot exists already (a retry reads the one it had): its tasks open at once."""
    if job.status == J.PREPARING:
        job.update_time = utcnow()  # taken again: quiet for another while
    else:
        move_job(session, job, J.PREPARING, reason="preparation_started")
    if (job.preparation or {}).get("status") == P.VERIFIED:
        _opentasks_of(session, job)
        return True
    move_preparation(job, P.SNAPSHOTTING)
    return False


def snapshot_verified(session: Session, job: JobRow, sha256: str, selected: int) -> None:
    """The snapshot is made: the job reads it, and its tasks may be claimed. Once: a job
    verified already (by another preparer of a stalled one) is left as it was, so the
    tasks opened here are its attempt's first."""
    verified = move_preparation(
        job,
        P.VERIFIED,
        snapshot_sha256=sha256,
        selected_examples=selected,
        trainable_examples=job.planned().trainable_examples,
    )
    if not verified:
        return
    job.dataset_sha256, job.snapshot_time = sha256, utcnow()
    append_event(
        session,
        job,
        "transition",
        attempt=job.attempt_count,
        status=J.PREPARING,
        reason="snapshot_verified",
    )
    _open_tasks(session, job)


def preparation_failed(session: Session, job: JobRow, code: str) -> None:
    """The input cannot be snapshotted: nothing ran, the job fails uncharged."""
    move_preparation(job, P.FAILED, failure_code=code)
    failure = (code, *INPUT_FAILED)
    move_attempt(session, job, current_attempt(session, job), A.FAILED, failure=failure)
    move_job(session, job, J.FAILED, reason="preparation_failed", failure=failure)


def _opentasks_of(session: Session, job: JobRow) -> None:
    """The current attempt's tasks, unless they are made already."""
    if not tasks_of(session, job):
        _open_tasks(session, job)


def _open_tasks(session: Session, job: JobRow) -> None:
    """Make the current attempt's tasks: a lead on the first machine the job names (or for
    the platform's executor), a join on each other, offered once the lead coordinates."""
    machines = list(job.frozen().resources.machines) or [""]
    mark(session, claimable_topic(job.org, machines[0]))  # the lead's; joins wait for it
    now = utcnow()
    for position, machine in enumerate(machines):
        session.add(
            TaskRow(
                id=new_id("tsk"),
                org=job.org,
                job_id=job.id,
                attempt_number=job.attempt_count,
                position=position,
                role="lead" if position == 0 else "join",
                machine=machine,
                world_size=len(machines),
                status=T.OPEN if position == 0 else T.WAITING,
                create_time=now,
            )
        )
