"""Logging set-up of a service: each line with the request id of the call it serves."""

from __future__ import annotations

from services.core import context
from trainyard import logs


def configure(process: str, *, fmt: str = "auto", level: str = "INFO") -> None:
    logs.configure(process, fmt=fmt, level=level, request_id=context.request_id.get)
