"""What every trainer is: it declares what it supports, and runs a typed plan, emitting
typed events. A team adds one by declaring it under the `trainyard.trainers` entry-point
group (see `registry`); the agent is not touched."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable, Iterable
from typing import ClassVar, Protocol

from executor.wire.plan import Plan
from executor.wire.protocol import Output, State
from trainyard.training import events

# Where a trainer's events go: `wire.protocol.emit` in a trainer process.
Emit = Callable[[events.Event | Output | State], None]


@dataclasses.dataclass(frozen=True)
class Supports:
    """What a trainer runs, as an executor's hello declares it. `bases` names bases it
    trains by name; `rows` the kinds of base it trains (a catalog entry's `rows`: `chat`,
    `decision`)."""

    bases: tuple[str, ...] = ()
    rows: tuple[str, ...] = ()
    adaptations: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()

    @staticmethod
    def union(every: Iterable[Supports]) -> Supports:
        """What any of them supports, each list in first-seen order."""
        every = list(every)

        def merged(name: str) -> tuple[str, ...]:
            return tuple(dict.fromkeys(v for s in every for v in getattr(s, name)))

        return Supports(**{f.name: merged(f.name) for f in dataclasses.fields(Supports)})


class Trainer(Protocol):
    """One trainer. `run` returns the process's exit status; SIGTERM asks it to stop
    cooperatively (see `Stop`)."""

    name: ClassVar[str]
    supports: ClassVar[Supports]

    def run(self, plan: Plan, emit: Emit) -> int: ...


class Stop:
    """Set once SIGTERM came: the trainer finishes its step, saves and reports."""

    def __init__(self) -> None:
        self.asked = False

    @classmethod
    def on_sigterm(cls) -> Stop:
        stop = cls()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        return stop

    def set(self) -> None:
        self.asked = True
