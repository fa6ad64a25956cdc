"""The one lifecycle: every change of a job's, an attempt's, a task's, a
preparation's, a training client's and its operations', a stored object's or a money
hold's state, as named transitions the services call, and the durable record each
leaves. The states and the moves each allows are `states`; nothing else assigns them.

Every transition runs in its caller's transaction with the job's row locked or its version
checked, so two writers cannot both move one job; each appends the job's events (and an
audit row for a job's move) in that same transaction.
"""

from __future__ import annotations

from services.core.lifecycle.clients import client_ready, end_client
from services.core.lifecycle.execution import (
    coordinate,
    fail,
    finish,
    lease,
    lose,
    release,
    report_status,
)
from services.core.lifecycle.holding import hold, stored_object
from services.core.lifecycle.money import release_holds
from services.core.lifecycle.moves import (
    append_event,
    append_metrics,
    current_attempt,
    failure_of,
    held,
    move_attempt,
    move_job,
    move_preparation,
    move_task,
)
from services.core.lifecycle.objects import object_stored
from services.core.lifecycle.operations import operation_done, operation_failed, operation_sent
from services.core.lifecycle.ownership import cancel, requeue, tombstone
from services.core.lifecycle.preparation import (
    preparation_failed,
    snapshot_verified,
    start_preparation,
)

__all__ = [
    "append_event",
    "append_metrics",
    "cancel",
    "client_ready",
    "coordinate",
    "current_attempt",
    "end_client",
    "fail",
    "failure_of",
    "finish",
    "held",
    "hold",
    "lease",
    "lose",
    "move_attempt",
    "move_job",
    "move_preparation",
    "move_task",
    "object_stored",
    "operation_done",
    "operation_failed",
    "operation_sent",
    "preparation_failed",
    "release",
    "release_holds",
    "report_status",
    "requeue",
    "snapshot_verified",
    "start_preparation",
    "stored_object",
    "tombstone",
]
