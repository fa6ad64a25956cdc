"""Per-request context: the request id and the principal, visible to logs and services."""

from __future__ import annotations

import contextvars
import re
import uuid

from services.core import errors
from services.core.auth import Principal

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
# A caller's `x-request-id` is kept (logs and audit rows carry it) only in the shape Envoy's
# and common tracers' ids have; anything else is replaced with a fresh id.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
principal_var: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "principal", default=None
)


def principal() -> Principal:
    """The authenticated principal of the current request."""
    current = principal_var.get()
    if current is None:
        raise errors.Unauthenticated()
    return current


def request_id_of(sent: str | None) -> str:
    """The request id to act under: the caller's when it is a plain token, else a new one."""
    if sent and _REQUEST_ID.fullmatch(sent):
        return sent
    return uuid.uuid4().hex


def sees_project(project: str) -> bool:
    """Whether the current request's key may see the project's jobs: a key limited to
    projects sees theirs only, and work done outside a request (the services' own loops)
    sees every project. Every lookup of a job in an org's name asks this, so a job of
    another project answers as an unknown one wherever it is named."""
    current = principal_var.get()
    return current is None or current.sees_project(project)
