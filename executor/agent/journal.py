"""An audit of the wire: every event an agent sent and every acknowledgement it had, one
JSON line each (`TRAINYARD_EXECUTOR_JOURNAL`)."""

from __future__ import annotations

import json
from pathlib import Path

from trainyard.training.events import Event, Metric


class Journal:
    def __init__(self, path: Path) -> None:
        self._file = path.open("a")

    def note(
        self, what: str, task_id: str, sent: list[Event] | None = None, **fields: object
    ) -> None:
        """One line: what happened (`sent`, `acked`) to which task, with its fields; a send
        of nothing is not written."""
        if what == "sent" and not sent:
            return
        record: dict[str, object] = {"what": what, "task": task_id, **fields}
        if sent:
            # [seq, type, series, step]: a metric's, or "" and null.
            record["events"] = [
                [e.seq, e.type, e.name, e.step]
                if isinstance(e, Metric)
                else [e.seq, e.type, "", None]
                for e in sent
            ]
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
