"""The states of a job, its attempts, its tasks and its dataset's preparation, of a training
client and its operations, of a stored object and of a money hold, and the one table of
moves each allows. Pure: `lifecycle` applies them to rows.

A move to the state a thing is already in is a no-op; any move its table does not allow is
`INVALID_TRANSITION`. Terminal states allow nothing, except that an explicit retry starts
a new attempt of a failed or cancelled job (`lifecycle.requeue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from services.core import errors


class JobStatus(StrEnum):
    """AIP-216 style: the product's state (ARCHITECTURE.md §2)."""

    QUEUED = "queued"
    PREPARING = "preparing"
    RUNNING = "running"
    EVALUATING = "evaluating"
    FINALIZING = "finalizing"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"


class AttemptStatus(StrEnum):
    """What the current execution is doing (`002_…` "Estados da tentativa")."""

    QUEUED = "queued"
    LEASED = "leased"
    ACCEPTED = "accepted"
    STARTED = "started"
    FINALIZING = "finalizing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class TaskStatus(StrEnum):
    """One executor's share of an attempt, claimed under a lease."""

    WAITING = "waiting"  # a join, until its lead reports the address it coordinates on
    OPEN = "open"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class PreparationStatus(StrEnum):
    """The dataset snapshot (`002_…` "Preparação")."""

    QUEUED = "queued"
    SNAPSHOTTING = "snapshotting"
    VERIFIED = "verified"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ClientStatus(StrEnum):
    """A training client: an engine executor loading it, holding it, or no longer."""

    PLACING = "placing"
    READY = "ready"
    FAILED = "failed"  # its engine could not load or keep it
    LOST = "lost"  # its executor went away
    DELETED = "deleted"


class OperationStatus(StrEnum):
    """One call on a training client, stored by `(client, seq)`."""

    QUEUED = "queued"
    SENT = "sent"  # pushed on its executor's stream, not yet answered
    DONE = "done"
    FAILED = "failed"


class ObjectStatus(StrEnum):
    """An org's object: granted, then kept once its upload reads back as granted."""

    PENDING = "pending"
    STORED = "stored"


class HoldStatus(StrEnum):
    """A window of device- or engine-seconds held against a payer's wallet."""

    LIVE = "live"
    RELEASED = "released"


J, A, T, P = JobStatus, AttemptStatus, TaskStatus, PreparationStatus

TERMINAL = frozenset({J.SUCCEEDED, J.REJECTED, J.FAILED, J.CANCELLED, J.STOPPED})
# `002_…` "Retry explícito": only a failed or cancelled job is run again.
RETRYABLE = frozenset({J.FAILED, J.CANCELLED})
# The job wants its running tasks stopped: an executor is told `cancel`.
STOPPING = frozenset({J.CANCELLING, J.CANCELLED, J.STOPPED, J.FAILED})
ATTEMPT_TERMINAL = frozenset({A.SUCCEEDED, A.FAILED, A.CANCELLED, A.EXPIRED})
TASK_ENDED = frozenset({T.DONE, T.FAILED, T.EXPIRED, T.CANCELLED})
PREPARATION_ENDED = frozenset({P.VERIFIED, P.FAILED, P.CANCELLED})
C, Op = ClientStatus, OperationStatus
# A client an engine holds, or is loading.
CLIENT_LIVE = (C.PLACING, C.READY)
# An operation its engine has not answered.
OPERATION_PENDING = (Op.QUEUED, Op.SENT)

JOB_MOVES: Mapping[str, frozenset[str]] = {
    J.QUEUED: frozenset({J.PREPARING, J.FAILED, J.CANCELLED, J.STOPPED}),
    # `cancelling` once an executor holds the task: the cancel must reach it first.
    J.PREPARING: frozenset({J.RUNNING, J.CANCELLING, J.FAILED, J.CANCELLED, J.STOPPED}),
    J.RUNNING: frozenset({J.EVALUATING, J.FINALIZING, J.CANCELLING, J.FAILED, J.STOPPED}),
    J.EVALUATING: frozenset({J.FINALIZING, J.CANCELLING, J.FAILED, J.STOPPED}),
    J.FINALIZING: frozenset({J.SUCCEEDED, J.REJECTED, J.FAILED}),
    J.CANCELLING: frozenset({J.CANCELLED, J.FAILED}),
    **{state: frozenset() for state in TERMINAL},
}
ATTEMPT_MOVES: Mapping[str, frozenset[str]] = {
    A.QUEUED: frozenset({A.LEASED, A.FAILED, A.CANCELLED}),
    # Back to `queued` when the executor gives its task back unrun.
    A.LEASED: frozenset({A.QUEUED, A.ACCEPTED, A.STARTED, A.FAILED, A.CANCELLED, A.EXPIRED}),
    A.ACCEPTED: frozenset({A.STARTED, A.FAILED, A.CANCELLED, A.EXPIRED}),
    A.STARTED: frozenset({A.FINALIZING, A.SUCCEEDED, A.FAILED, A.CANCELLED, A.EXPIRED}),
    A.FINALIZING: frozenset({A.SUCCEEDED, A.FAILED, A.CANCELLED, A.EXPIRED}),
    **{state: frozenset() for state in ATTEMPT_TERMINAL},
}
TASK_MOVES: Mapping[str, frozenset[str]] = {
    T.WAITING: frozenset({T.OPEN, T.FAILED, T.CANCELLED, T.DONE}),
    T.OPEN: frozenset({T.LEASED, T.FAILED, T.CANCELLED, T.DONE}),
    # Back to `open` when its executor gives it back unrun.
    T.LEASED: frozenset({T.OPEN, T.DONE, T.FAILED, T.EXPIRED, T.CANCELLED}),
    **{state: frozenset() for state in TASK_ENDED},
}
PREPARATION_MOVES: Mapping[str, frozenset[str]] = {
    P.QUEUED: frozenset({P.SNAPSHOTTING, P.CANCELLED}),
    P.SNAPSHOTTING: frozenset({P.VERIFIED, P.FAILED, P.CANCELLED}),
    **{state: frozenset() for state in PREPARATION_ENDED},
}

CLIENT_MOVES: Mapping[str, frozenset[str]] = {
    C.PLACING: frozenset({C.READY, C.DELETED, C.FAILED, C.LOST}),
    C.READY: frozenset({C.DELETED, C.FAILED, C.LOST}),
    **{state: frozenset() for state in (C.FAILED, C.LOST, C.DELETED)},
}
OPERATION_MOVES: Mapping[str, frozenset[str]] = {
    # An engine's answer is applied to any call not yet answered, marked sent or not.
    Op.QUEUED: frozenset({Op.SENT, Op.DONE, Op.FAILED}),
    Op.SENT: frozenset({Op.DONE, Op.FAILED}),
    **{state: frozenset() for state in (Op.DONE, Op.FAILED)},
}
# Deleting an object removes its row: no state follows `stored`.
OBJECT_MOVES: Mapping[str, frozenset[str]] = {
    ObjectStatus.PENDING: frozenset({ObjectStatus.STORED}),
    ObjectStatus.STORED: frozenset(),
}
HOLD_MOVES: Mapping[str, frozenset[str]] = {
    HoldStatus.LIVE: frozenset({HoldStatus.RELEASED}),
    HoldStatus.RELEASED: frozenset(),
}


def check_move(moves: Mapping[str, frozenset[str]], current: str, target: str) -> bool:
    """True when the move changes the state, False for a same-state replay; raises
    INVALID_TRANSITION for anything else."""
    if target not in moves:
        raise ValueError("unknown state")
    if current == target:
        return False
    if target not in moves[current]:
        raise errors.InvalidTransition()
    return True


class CancelPlan(StrEnum):
    """What a cancel does."""

    NOW = "now"  # nothing runs: cancelled at once, uncharged
    COOPERATIVE = "cooperative"  # an executor holds a task: it is told, via `cancelling`
    NOOP = "noop"


def cancel_plan(status: str, *, held: bool = False) -> CancelPlan:
    """What a cancel does from `status`; `held` says whether an executor holds one of the
    job's tasks (a trainer saves what it trained). Raises TRAINING_JOB_FINALIZING or
    INVALID_TRANSITION where a cancel is refused."""
    if status == J.QUEUED or (status == J.PREPARING and not held):
        return CancelPlan.NOW
    if status in (J.PREPARING, J.RUNNING, J.EVALUATING):
        return CancelPlan.COOPERATIVE
    if status in (J.CANCELLING, J.CANCELLED):
        return CancelPlan.NOOP
    if status == J.FINALIZING:
        raise errors.FailedPrecondition(
            "The job is finalizing; there is nothing left to stop.",
            reason="TRAINING_JOB_FINALIZING",
        )
    raise errors.InvalidTransition("The job has ended and cannot be cancelled.")


# What a user reads for each failure of a run: (category, message). Categories are the
# contract's: `input`, `executor`, `trainer`, `platform`, `limit`.
FAILURES: Mapping[str, tuple[str, str]] = {
    "executor_lost": ("executor", "The executor running the job stopped reporting."),
    "trainer_failed": (
        "trainer",
        "The trainer exited without a result; its output is the attempt's log "
        "(GET /v1/train/jobs/{id}/attempts/{attempt}/logs, or trainyard jobs logs).",
    ),
    "trainer_no_result": (
        "trainer",
        "The trainer ended without a result; its output is the attempt's log "
        "(GET /v1/train/jobs/{id}/attempts/{attempt}/logs, or trainyard jobs logs).",
    ),
    "base_changed": (
        "input",
        "The executor's files of the job's base differ from the revision the job pinned at "
        "create. Put those files back on the executor, or create the job again to train on "
        "the base as it is now (GET /v1/train/models shows its revision).",
    ),
    "executor_failed": ("executor", "The executor failed while running the task; retry the job."),
    "executor_disk_full": (
        "executor",
        "The executor's disk cannot hold the task (its base's size and a margin); free space "
        "in its work directory or raise TRAINYARD_EXECUTOR_WORK_BUDGET_GIB, then retry the job.",
    ),
    "input_unavailable": (
        "platform",
        "The executor could not read the job's dataset snapshot or saved state; retry the job.",
    ),
    "input_unsafe": (
        "input",
        "The adapter or saved state the job starts from is not an archive Trainyard wrote; "
        "nothing of it was unpacked. Start from an output Trainyard made.",
    ),
    "artifact_upload_failed": (
        "platform",
        "The object store refused the run's output or stayed unreachable; retry the job "
        "(with resume_from_checkpoint when a state was saved).",
    ),
    "artifact_rejected": (
        "platform",
        "The run's output did not read back as it was uploaded and was discarded; retry the job.",
    ),
    "artifact_pending_limit": (
        "limit",
        "The org holds too many granted, unconfirmed upload bytes to store the run's output; "
        "confirm them or let their grants lapse, then retry the job.",
    ),
}
RUN_FAILED = ("trainer", "The run failed; see the job's events.")
# A trainer's failure with the exception its log ends with: this, then that line.
TRAINER_ERROR = (
    "The trainer failed; the attempt's log (GET /v1/train/jobs/{id}/attempts/{attempt}/logs) ends: "
)
# The failures whose message ends with the trainer's last exception, when its log has one.
TRAINER_ENDED = ("trainer_failed", "trainer_no_result")
BOUND_REACHED = ("limit", "The run reached a bound.")
# Why a job is stopped by its own bounds or its payer's money (HIP-1333 §10).
STOPS: Mapping[str, tuple[str, str]] = {
    "max_seconds": ("limit", "The job used the device-seconds its max_seconds allows."),
    "budget": ("limit", "The job used what its budget pays for."),
    "insufficient_balance": (
        "limit",
        "The wallet could not hold the job's next window; add credit, then retry the job.",
    ),
    "spend_cap": ("limit", "The job's next window would pass a monthly spend cap."),
    "key_spend_cap": (
        "limit",
        "The job's next window would pass the monthly spend cap of the API key that created it.",
    ),
    # HIP-1333 names these two; they never arise here (README, "Differences from the seeds"):
    # every org's wallet pays its jobs, and the balance is read in the job's own store.
    "no_payer": ("limit", "No wallet pays for the job."),
    "balance_unavailable": ("limit", "The wallet's balance could not be read; retry the job."),
}
INPUT_FAILED = ("input", "The dataset could not be snapshotted.")
# What a user reads when a training client ends, by why it ended.
CLIENT_GONE: Mapping[str, str] = {
    "executor_lost": "The executor holding the client went away; create another client.",
    "engine_failed": "The engine could not hold the client; create another client.",
    "deleted": "The client was deleted.",
}
