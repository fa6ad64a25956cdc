"""Logging set-up: JSON lines when not on a terminal, each line with its request id."""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

from services.core import context


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = context.request_id.get()
        return True


def configure(process: str, *, fmt: str = "auto", level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    as_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    if as_json:
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                static_fields={"process": process},
            )
        )
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
