"""Per-request context: the request id and the principal, visible to logs and services."""

from __future__ import annotations

import contextvars

from services.core import errors
from services.core.auth import Principal

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
principal_var: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "principal", default=None
)


def principal() -> Principal:
    """The authenticated principal of the current request."""
    current = principal_var.get()
    if current is None:
        raise errors.Unauthenticated()
    return current
