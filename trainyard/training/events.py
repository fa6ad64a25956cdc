"""The events an executor reports for a task, typed: parsed once from the wire's
`TaskEvent` (a `type` string and a bag of fields) and written back to it, so the runner,
the agent and ClaimService share one reading of what each kind carries and allows.

`parse` makes exactly the checks ClaimService answers with a field violation; its
refusal is `InvalidEvent`, naming the field and never the value.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import ClassVar, TypeVar

from trainyard.claim.v1 import task_pb2
from trainyard.job.v1 import job_pb2

# The most events one report holds, and the longest log line kept (in UTF-8 bytes).
MAX_EVENTS = 500
MAX_LOG_BYTES = 4096

_ADDR = re.compile(r"^[A-Za-z0-9.-]{1,253}:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$")
_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_SERIES = re.compile(r"^[a-z][a-z0-9_./-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
M = TypeVar("M", job_pb2.Evaluation, job_pb2.Outcome)


class ReportedStatus(StrEnum):
    """A status an executor reports for its task: a lead's run, or a join's share."""

    ACCEPTED = "accepted"
    RUNNING = "running"
    EVALUATING = "evaluating"
    FINALIZING = "finalizing"
    FAILED = "failed"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    DONE = "done"  # a join's share is trained


S = ReportedStatus
# The event types, as the wire spells them.
TYPES = ("status", "coordinator", "metric", "log", "stdio", "artifact", "result")
# What a lead reports of its run, and a join of its share of it.
LEAD_STATUSES = frozenset(
    {S.ACCEPTED, S.RUNNING, S.EVALUATING, S.FINALIZING, S.FAILED, S.STOPPED, S.CANCELLED}
)
JOIN_STATUSES = frozenset({S.DONE, S.FAILED, S.STOPPED})
_REPORTED = LEAD_STATUSES | JOIN_STATUSES
_REPORTED_ORDER = tuple(str(s) for s in S if s in _REPORTED)
# After one of these the trainer has nothing more to say about the run.
RUN_ENDED = frozenset({S.CANCELLED, S.FAILED, S.STOPPED, S.DONE})


class InvalidEvent(ValueError):
    """An event the service refuses: `field` names what is at fault, as the wire spells it,
    and `supported` the values it may take when they are a closed set."""

    def __init__(self, field: str, message: str, supported: tuple[str, ...] = ()) -> None:
        super().__init__(f"{field} {message}")
        self.field, self.message, self.supported = field, message, supported


@dataclasses.dataclass(frozen=True)
class Event:
    """One event; `seq` numbers it among its task's (from 1; 0 until the runner numbers it,
    or, for a report that numbers none of its events, until ClaimService applies it)."""

    type: ClassVar[str]
    seq: int = dataclasses.field(default=0, kw_only=True)


@dataclasses.dataclass(frozen=True)
class Status(Event):
    type: ClassVar[str] = "status"
    status: str
    error: str = ""

    @property
    def ends_run(self) -> bool:
        return self.status in RUN_ENDED


@dataclasses.dataclass(frozen=True)
class Coordinator(Event):
    """The `host:port` a lead coordinates its world on."""

    type: ClassVar[str] = "coordinator"
    addr: str


@dataclasses.dataclass(frozen=True)
class Metric(Event):
    type: ClassVar[str] = "metric"
    name: str
    step: int
    value: float


@dataclasses.dataclass(frozen=True)
class Log(Event):
    type: ClassVar[str] = "log"
    line: str

    @classmethod
    def of(cls, text: str) -> Log:
        """A log line cut to what the wire keeps, at a character boundary."""
        return cls(line=text.encode()[:MAX_LOG_BYTES].decode(errors="ignore"))


@dataclasses.dataclass(frozen=True)
class Stdio(Event):
    """The next piece of the attempt's log: its trainer's standard output and error as
    written, pieces in order; the attempt's log is their concatenation."""

    type: ClassVar[str] = "stdio"
    text: str

    @classmethod
    def pieces(cls, text: str) -> list[Stdio]:
        """`text` cut into pieces the wire carries, each at most MAX_LOG_BYTES of UTF-8,
        cut at character boundaries, so the pieces join back into `text`."""
        out: list[Stdio] = []
        data = text.encode()
        while data:
            # A cut inside a character drops its partial bytes; they lead the next piece.
            piece = data[:MAX_LOG_BYTES].decode(errors="ignore")
            out.append(cls(text=piece))
            data = data[len(piece.encode()) :]
        return out


@dataclasses.dataclass(frozen=True)
class Artifact(Event):
    """An output stored under a grant, named by its sha256."""

    type: ClassVar[str] = "artifact"
    sha256: str


@dataclasses.dataclass(frozen=True)
class Result(Event):
    """The run ended with what it made (the output, and the state it may resume from)."""

    type: ClassVar[str] = "result"
    sha256: str = ""
    base_sha256: str = ""
    step: int = 0
    served_step: int = 0
    checkpoint_sha256: str = ""
    checkpoint_step: int = 0
    dataset_sha256: str = ""
    training_config_sha256: str = ""
    training_seconds: float = 0.0
    evaluation: job_pb2.Evaluation | None = None
    outcome: job_pb2.Outcome | None = None


_SCALARS = (
    "sha256", "base_sha256", "step", "served_step", "checkpoint_sha256", "checkpoint_step",
    "dataset_sha256", "training_config_sha256", "training_seconds",
)  # fmt: skip


def parse(proto: task_pb2.TaskEvent) -> Event:
    """The typed event the wire's message carries; raises `InvalidEvent`. A `seq` of 0 is an
    event the sender left unnumbered (HIP-1333 §5's body): see `parse_report`."""
    if proto.seq < 0:
        raise InvalidEvent("events.seq", "must not be negative")
    seq = proto.seq
    match proto.type:
        case "status":
            if proto.status not in _REPORTED:
                raise InvalidEvent(
                    "events.status", "is not a status an executor reports", _REPORTED_ORDER
                )
            if proto.error and not _CODE.match(proto.error):
                raise InvalidEvent("events.error", "must be a short lower-case code")
            return Status(proto.status, proto.error, seq=seq)
        case "coordinator":
            if not _ADDR.match(proto.addr):
                raise InvalidEvent("events.addr", "must be host:port")
            return Coordinator(proto.addr, seq=seq)
        case "metric":
            if not _SERIES.match(proto.name) or not proto.HasField("value"):
                raise InvalidEvent("events.name", "must name a series and carry a value")
            return Metric(proto.name, proto.step, proto.value, seq=seq)
        case "log":
            return dataclasses.replace(Log.of(proto.line), seq=seq)
        case "stdio":
            if len(proto.text.encode()) > MAX_LOG_BYTES:
                raise InvalidEvent("events.text", f"must be at most {MAX_LOG_BYTES} bytes")
            return Stdio(proto.text, seq=seq)
        case "artifact":
            if not _SHA256.match(proto.sha256):
                raise InvalidEvent("events.sha256", "must be a sha256")
            return Artifact(proto.sha256, seq=seq)
        case "result":
            result = proto.result
            # An output names its bytes and the base they were trained from: its
            # provenance record holds both.
            if result.sha256 and not _SHA256.match(result.sha256):
                raise InvalidEvent("events.result.sha256", "must be a sha256")
            if result.sha256 and not _SHA256.match(result.base_sha256):
                raise InvalidEvent("events.result.base_sha256", "must be a sha256")
            return Result(
                **{name: getattr(result, name) for name in _SCALARS},
                evaluation=_copy(result, "evaluation", job_pb2.Evaluation()),
                outcome=_copy(result, "outcome", job_pb2.Outcome()),
                seq=seq,
            )
    raise InvalidEvent("events.type", "is not an event type", TYPES)


def parse_report(protos: Sequence[task_pb2.TaskEvent]) -> list[Event]:
    """A report's events, typed: every one numbered (each applied once, by its number) or
    none (numbered by ClaimService in arrival order); a report mixing the two is refused,
    as its numbers could not be told from the service's."""
    typed = [parse(proto) for proto in protos]
    if len({event.seq == 0 for event in typed}) > 1:
        raise InvalidEvent("events.seq", "must be set on every event of a report or on none")
    return typed


def _copy(result: task_pb2.TaskResult, field: str, into: M) -> M | None:
    if not result.HasField(field):
        return None
    into.CopyFrom(getattr(result, field))
    return into


def to_proto(event: Event) -> task_pb2.TaskEvent:
    """The wire's message for a typed event."""
    proto = task_pb2.TaskEvent(seq=event.seq, type=event.type)
    match event:
        case Status(status=status, error=error):
            proto.status, proto.error = status, error
        case Coordinator(addr=addr):
            proto.addr = addr
        case Metric(name=name, step=step, value=value):
            proto.name, proto.step, proto.value = name, step, value
        case Log(line=line):
            proto.line = line
        case Stdio(text=text):
            proto.text = text
        case Artifact(sha256=sha256):
            proto.sha256 = sha256
        case Result():
            result = proto.result
            for name in _SCALARS:
                setattr(result, name, getattr(event, name))
            result.SetInParent()
            if event.evaluation is not None:
                result.evaluation.CopyFrom(event.evaluation)
            if event.outcome is not None:
                result.outcome.CopyFrom(event.outcome)
    return proto
