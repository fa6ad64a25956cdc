"""Attempt logs: each attempt's trainer output (standard output and error, in the order
written), kept as pieces at their byte offsets in the whole. ClaimService appends the
pieces a lead task reports, in its report order; JobService reads a range of them.

Offsets count the UTF-8 bytes of the whole log. Past `MAX_LOG_BYTES` an attempt keeps its
log's end and drops its start, so a crashed trainer's last lines always stay."""

from __future__ import annotations

import dataclasses
import re

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core.store import utcnow
from services.core.tables import AttemptLogRow, JobRow
from services.core.wakeups import job_topic, mark

# What an attempt's log keeps: its last 16 MiB.
MAX_LOG_BYTES = 16 * 1024 * 1024


def append(session: Session, job: JobRow, attempt: int, text: str) -> None:
    """Add the next piece of the attempt's log in the caller's transaction; the job's
    followers wake once it commits."""
    text = text.replace("\x00", "\ufffd")  # PostgreSQL's text holds no NUL
    if not text:
        return
    ends: dict[tuple[str, int], int] = session.info.setdefault("attempt_log_ends", {})
    key = (job.id, attempt)
    if key not in ends:
        ends[key] = _end(session, job.id, attempt)
    size = len(text.encode())
    session.add(
        AttemptLogRow(
            job_id=job.id,
            attempt_number=attempt,
            offset=ends[key],
            org=job.org,
            text=text,
            size=size,
            lines=text.count("\n"),
            create_time=utcnow(),
        )
    )
    ends[key] += size
    if ends[key] > MAX_LOG_BYTES:
        session.flush()
        r = AttemptLogRow
        session.execute(
            sa.delete(r).where(
                r.job_id == job.id,
                r.attempt_number == attempt,
                r.offset + r.size <= ends[key] - MAX_LOG_BYTES,
            )
        )
    mark(session, job_topic(job.id))


def _end(session: Session, job_id: str, attempt: int) -> int:
    r = AttemptLogRow
    found = session.scalar(
        sa.select(sa.func.max(r.offset + r.size)).where(
            r.job_id == job_id, r.attempt_number == attempt
        )
    )
    return int(found or 0)


def sizes(session: Session, job_id: str) -> dict[int, int]:
    """The bytes each of the job's attempts' logs holds, by attempt number."""
    r = AttemptLogRow
    rows = session.execute(
        sa.select(r.attempt_number, sa.func.max(r.offset + r.size))
        .where(r.job_id == job_id)
        .group_by(r.attempt_number)
    ).all()
    return {int(number): int(end) for number, end in rows}


def delete(session: Session, job_id: str) -> None:
    """A job's logs go with what it made (its tombstone)."""
    session.execute(sa.delete(AttemptLogRow).where(AttemptLogRow.job_id == job_id))


@dataclasses.dataclass(frozen=True)
class Piece:
    offset: int
    size: int
    lines: int


@dataclasses.dataclass(frozen=True)
class Part:
    """A part of a log: its text, the byte it starts at, the line it starts at (from 1,
    counted in what is kept), and the log's kept start and whole size."""

    text: str
    offset: int
    first_line: int
    start: int
    size: int

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.text.encode())


class Log:
    """One attempt's log as stored: the pieces' places, read once; their text on demand."""

    def __init__(self, session: Session, job_id: str, attempt: int) -> None:
        self._session, self._job_id, self._attempt = session, job_id, attempt
        r = AttemptLogRow
        rows = session.execute(
            sa.select(r.offset, r.size, r.lines)
            .where(r.job_id == job_id, r.attempt_number == attempt)
            .order_by(r.offset)
        ).all()
        self.pieces = [Piece(int(o), int(s), int(n)) for o, s, n in rows]
        self.start = self.pieces[0].offset if self.pieces else 0
        self.size = self.pieces[-1].offset + self.pieces[-1].size if self.pieces else 0

    def _text(self, first: int, last: int) -> str:
        """The text of pieces `first` to `last` (indices, inclusive), joined."""
        if first > last:
            return ""
        r = AttemptLogRow
        rows = self._session.scalars(
            sa.select(r.text)
            .where(
                r.job_id == self._job_id,
                r.attempt_number == self._attempt,
                r.offset >= self.pieces[first].offset,
                r.offset <= self.pieces[last].offset,
            )
            .order_by(r.offset)
        )
        return "".join(rows)

    def _lines_before(self, index: int) -> int:
        return sum(p.lines for p in self.pieces[:index])

    def _part(self, text: str, offset: int, first_line: int) -> Part:
        return Part(text, offset, first_line, self.start, self.size)

    def bytes(self, offset: int, limit: int) -> Part:
        """At most `limit` bytes from `offset` (moved to the first byte kept, and off a
        character's middle), never ending inside a character."""
        offset = min(max(offset, self.start), self.size)
        hits = [i for i, p in enumerate(self.pieces) if p.offset + p.size > offset]
        hits = [i for i in hits if self.pieces[i].offset < offset + limit]
        if not hits:
            return self._part("", offset, self._lines_before(len(self.pieces)) + 1)
        first, last = hits[0], hits[-1]
        data = self._text(first, last).encode()
        skip = offset - self.pieces[first].offset
        while skip < len(data) and data[skip] & 0xC0 == 0x80:
            skip += 1  # a character's continuation bytes: start at the next whole one
        text = data[skip : skip + limit].decode(errors="ignore")
        before = data[:skip].count(b"\n") + self._lines_before(first)
        return self._part(text, self.pieces[first].offset + skip, before + 1)

    def lines(self, start_line: int, count: int) -> Part:
        """`count` lines from line `start_line` (from 1, in what is kept)."""
        skip, first = start_line - 1, 0
        while first < len(self.pieces) and self.pieces[first].lines < skip:
            skip -= self.pieces[first].lines
            first += 1
        if first == len(self.pieces):
            return self._part("", self.size, self._lines_before(first) + 1)
        text = self._text(first, len(self.pieces) - 1)
        cut = 0
        for _ in range(skip):
            cut = text.index("\n", cut) + 1
        chosen = "".join(_split(text[cut:])[:count])
        offset = self.pieces[first].offset + len(text[:cut].encode())
        return self._part(chosen, offset, start_line)

    def tail(self, count: int) -> Part:
        """The last `count` lines (a last line without its end counts as one)."""
        first, seen = len(self.pieces), 0
        while first > 0 and seen <= count:
            first -= 1
            seen += self.pieces[first].lines
        text = self._text(first, len(self.pieces) - 1)
        lines = _split(text)
        kept = lines[-count:] if count else []
        chosen = "".join(kept)
        offset = self.size - len(chosen.encode())
        first_line = self._lines_before(first) + len(lines) - len(kept) + 1
        return self._part(chosen, offset, first_line)


def _split(text: str) -> list[str]:
    """The lines of `text`, each with its "\n"; a last line without one counts too."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


# A line that names an exception as Python prints it last in a traceback:
# `ValueError: …`, `torch.OutOfMemoryError: …`, `KeyboardInterrupt`.
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b(?::|$)"
)
# An absolute path in it (the executor's disk): the job's message names none.
_PATH = re.compile(r"(?<![\w.~])/[^\s'\"]*")
# The most characters of it a failure message carries.
MAX_ERROR_CHARS = 160
# How many of the log's last lines are searched for it.
ERROR_LINES = 60


def error_line(text: str) -> str:
    """The last exception line in `text` (a log's end), one line of printable characters
    cut to `MAX_ERROR_CHARS`, with its absolute paths as `…`; "" when it names none."""
    for line in reversed(text.splitlines()):
        line = " ".join("".join(c if c.isprintable() else " " for c in line).split())
        if _EXCEPTION.match(line):
            line = _PATH.sub("…", line)
            return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 1] + "…"
    return ""


def last_error(session: Session, job_id: str, attempt: int) -> str:
    """The exception an attempt's log ends with (`error_line` of its last lines)."""
    return error_line(Log(session, job_id, attempt).tail(ERROR_LINES).text)
