"""The executor's side: a task leased, given back, coordinating its joins; the statuses it
reports; the run's end by result, failure, or a lease that lapsed."""

from __future__ import annotations

from sqlalchemy.orm import Session

from services.core import attempt_logs
from services.core.lifecycle.money import release_holds
from services.core.lifecycle.moves import (
    A,
    J,
    T,
    append_event,
    current_attempt,
    end_tasks,
    failure_of,
    move_attempt,
    move_job,
    move_task,
    tasks_of,
)
from services.core.states import (
    ATTEMPT_TERMINAL,
    TERMINAL,
    TRAINER_ENDED,
    JobStatus,
)
from services.core.store import utcnow
from services.core.tables import AttemptRow, JobRow, TaskRow

# -- the executor's side -------------------------------------------------------------------


def lease(session: Session, job: JobRow, task: TaskRow) -> None:
    """An executor holds the task now; a lead's attempt is leased with it."""
    move_task(task, T.LEASED)
    if task.role == "lead":
        move_attempt(session, job, current_attempt(session, job), A.LEASED)


def release(session: Session, job: JobRow, task: TaskRow) -> None:
    """The executor gives the task back unrun: open for another claim."""
    move_task(task, T.OPEN)
    release_holds(session, task_id=task.id, now=utcnow())
    attempt = current_attempt(session, job)
    if task.role == "lead" and attempt.status == A.LEASED:
        move_attempt(session, job, attempt, A.QUEUED)


def coordinate(session: Session, job: JobRow, task: TaskRow, addr: str) -> None:
    """The lead reports the address it coordinates on: its joins are offered with it."""
    task.coordinator = addr
    for join in tasks_of(session, job, T.WAITING):
        join.coordinator = addr
        move_task(join, T.OPEN)
    append_event(session, job, "coordinator", attempt=job.attempt_count)


def report_status(
    session: Session, job: JobRow, task: TaskRow, attempt: AttemptRow, status: str, error: str
) -> None:
    """A status the executor reports for a task. A lead's moves its attempt and the job,
    which stays `cancelling` once a cancel was asked; a join's ends the join, or the job."""
    cancelling = job.status == J.CANCELLING
    if task.role == "join":
        if status == "done":
            move_task(task, T.DONE)
        else:
            fail(session, job, attempt, error or f"join_{status}")
        return
    if status == "accepted":
        move_attempt(session, job, attempt, A.ACCEPTED)
    elif status == "running":
        move_attempt(session, job, attempt, A.STARTED)
        if not cancelling:
            move_job(session, job, J.RUNNING, reason="training_started")
    elif status == "evaluating" and not cancelling:
        move_job(session, job, J.EVALUATING, reason="evaluation_started")
    elif status == "finalizing":
        move_attempt(session, job, attempt, A.FINALIZING)
        if not cancelling:
            move_job(session, job, J.FINALIZING, reason="training_finished")
    elif status == "cancelled":
        finish(session, job, attempt, J.CANCELLED)
    elif status == "stopped":
        fail(session, job, attempt, error or "stopped", job_status=J.STOPPED)
    elif status == "failed":
        fail(session, job, attempt, error or "trainer_failed")


def finish(session: Session, job: JobRow, attempt: AttemptRow, status: JobStatus) -> None:
    """The run ended with its result (or a cancel before any): the job takes `status`,
    a cancelled one keeping what it trained."""
    if job.status in (J.RUNNING, J.EVALUATING) and status in (J.SUCCEEDED, J.REJECTED):
        move_job(session, job, J.FINALIZING, reason="training_finished")
    if attempt.status in (A.LEASED, A.ACCEPTED) and status != J.CANCELLED:
        move_attempt(session, job, attempt, A.STARTED)
    move_attempt(session, job, attempt, A.CANCELLED if status == J.CANCELLED else A.SUCCEEDED)
    move_job(session, job, status, reason="run_" + status)
    end_tasks(session, job, T.DONE)


def fail(
    session: Session,
    job: JobRow,
    attempt: AttemptRow,
    code: str,
    *,
    job_status: JobStatus = J.FAILED,
) -> None:
    """The run failed (or stopped at a bound): the attempt fails with its code, and the job
    too, unless it was being cancelled, which a failure completes."""
    logged = code in TRAINER_ENDED
    error = attempt_logs.last_error(session, job.id, attempt.attempt_number) if logged else ""
    failure = failure_of(code, stopped=job_status == J.STOPPED, error=error)
    move_attempt(session, job, attempt, A.FAILED, failure=failure)
    if job.status == J.CANCELLING:
        move_job(session, job, J.CANCELLED, reason="run_cancelled")
    elif job.status not in TERMINAL:
        move_job(session, job, job_status, reason=code, failure=failure)
    end_tasks(session, job, T.FAILED)


def lose(session: Session, job: JobRow, task: TaskRow) -> None:
    """A task silent past its lease: expired; a lost lead fails its job `executor_lost`
    (a run resumes only from its own checkpoint, so it is not moved elsewhere)."""
    move_task(task, T.EXPIRED)
    # Charged through its last report; what it held beyond that goes back.
    release_holds(session, task_id=task.id, now=utcnow())
    if job.status in TERMINAL or job.attempt_count != task.attempt_number:
        return
    attempt = current_attempt(session, job)
    failure = failure_of("executor_lost")
    if attempt.status not in ATTEMPT_TERMINAL:
        move_attempt(session, job, attempt, A.EXPIRED, failure=failure)
    if job.status == J.CANCELLING:
        move_job(session, job, J.CANCELLED, reason="executor_lost")
    else:
        move_job(session, job, J.FAILED, reason="executor_lost", failure=failure)
    end_tasks(session, job, T.FAILED)
