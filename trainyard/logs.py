"""Logging set-up for every Trainyard process: JSON lines when not on a terminal, each
line naming its process and, where there is one, the request it serves."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from pythonjsonlogger.json import JsonFormatter


class _RequestIdFilter(logging.Filter):
    def __init__(self, request_id: Callable[[], str]) -> None:
        super().__init__()
        self._request_id = request_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = self._request_id()
        return True


def configure(
    process: str,
    *,
    fmt: str = "auto",
    level: str = "INFO",
    request_id: Callable[[], str] = lambda: "",
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter(request_id))
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
    # Their request lines hold whole URLs: a presigned one's query is its signature, a
    # credential for as long as it lasts. Events and audit rows name objects by sha256.
    for name in ("httpx", "httpcore", "botocore", "boto3", "urllib3", "s3transfer"):
        logging.getLogger(name).setLevel(logging.WARNING)
