"""A lease's token and its fence: the token shown once and kept as its sha256, and the
checks every call an executor makes under a lease runs in its own transaction (the task's
current lease, not lapsed, on a task the caller may act on). Leases, reports and training
clients' engines share them."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy.orm import Session

from services.claims import store
from services.core import errors
from services.core.auth import Principal
from services.core.clients import ArtifactClient
from services.core.states import TaskStatus
from services.core.tables import TaskRow
from trainyard.artifact.v1 import artifact_pb2, artifact_service_pb2
from trainyard.claim.v1 import claim_service_pb2

# The most device-seconds a task's `held` says: the wire's int32, 68 device-years.
MAX_HELD = 2**31 - 1


def lease_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def lease_lost() -> errors.DomainError:
    return errors.DomainError(
        "The lease is not the task's current one; stop the task.",
        reason="LEASE_LOST",
        code=errors.Conflict.code,
    )


def check_platform(principal: Principal, platform: bool) -> None:
    if platform and not principal.runs_platform_tasks:
        raise errors.PermissionDenied("Only the platform credential claims as the platform.")


def may_act(principal: Principal, task: TaskRow) -> bool:
    """An org's executor acts on its org's tasks; the platform on the tasks no machine was
    named for, in whichever org."""
    return task.org == principal.org or (principal.runs_platform_tasks and task.machine == "")


def holds(task: TaskRow, token: str, now: dt.datetime) -> bool:
    """Whether `token` is the task's current lease and has not lapsed."""
    return (
        task.status == TaskStatus.LEASED
        and bool(token)
        and secrets.compare_digest(task.lease_sha256, lease_sha256(token))
        and task.lease_expires is not None
        and task.lease_expires > now
    )


def acting_on(
    session: Session, principal: Principal, job_id: str, task_id: str, *, lock: bool = False
) -> TaskRow:
    """The job's task an executor acts on, whatever lease it holds; NOT_FOUND for a task
    it may not see, as for one that does not exist."""
    task = store.task(session, task_id, lock=lock)
    if task is None or task.job_id != job_id or not may_act(principal, task):
        raise errors.NotFound()
    if task.machine == "" and not principal.runs_platform_tasks:
        raise errors.PermissionDenied(
            "A task the platform runs takes reports from the platform only."
        )
    return task


def grant_output(
    artifacts: ArtifactClient | None,
    org: str,
    producer: str,
    request: claim_service_pb2.RegisterTaskArtifactRequest,
) -> artifact_pb2.Grant:
    """ArtifactService's upload grant for an output registered under a lease, named as
    `producer`'s (the task's job, or a training client)."""
    if artifacts is None:
        raise errors.Unavailable()
    return artifacts.grant(
        org,
        artifact_service_pb2.GrantJobArtifactRequest(
            job_id=producer,
            task_id=request.task,
            kind=request.kind,
            name=request.name,
            sha256=request.sha256,
            size=request.size,
            meta=dict(request.meta),
        ),
    )
