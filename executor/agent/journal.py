"""An audit of the wire: every event an agent sent and every acknowledgement it had, and
when each task was assigned and its trainer handed the task, one JSON line each
(`TRAINYARD_EXECUTOR_JOURNAL`). Each line says when it was written (`time`, seconds since
the epoch), and each event sent when the trainer made it, so a benchmark can split a
task's latency into its hops (bench/training.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from trainyard.training.events import Event, Metric, Status


class Journal:
    def __init__(self, path: Path) -> None:
        self._file = path.open("a")

    def note(
        self,
        what: str,
        task_id: str,
        sent: list[Event] | None = None,
        made: Sequence[float] = (),
        **fields: object,
    ) -> None:
        """One line: what happened (`assigned`, `handed`, `sent`, `acked`) to which task,
        with its fields; a send of nothing is not written. `made` holds when each event
        sent was made (seconds since the epoch)."""
        if what == "sent" and not sent:
            return
        record: dict[str, object] = {"what": what, "task": task_id, "time": time.time(), **fields}
        if sent:
            # [seq, type, series, step, made]: a metric's series and step, a status's
            # name, or "" and null.
            times: list[float | None] = [*made] or [None] * len(sent)
            record["events"] = [
                [e.seq, e.type, *_named(e), at] for e, at in zip(sent, times, strict=True)
            ]
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()


def _named(event: Event) -> tuple[str, int | None]:
    if isinstance(event, Metric):
        return event.name, event.step
    if isinstance(event, Status):
        return event.status, None
    return "", None
