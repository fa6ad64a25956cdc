"""Wake-ups: a commit that changed what someone waits on wakes them at once.

A unit of work marks the topics it changed (`mark`: claimable tasks, a job's record);
once it commits, `Store.unit` publishes them. Every waiter on a topic wakes: in this
process by an event, in the other processes through a transport (`wakeup_transports`):
each process listens on a loopback UDP port named by a file in the run directory, and
hears only datagrams signed with the secret kept there (any local process may send to a
loopback port; only the stack's user reads the secret). On PostgreSQL the same wake-up
goes out by `LISTEN/NOTIFY` too, so replicas on other hosts hear it; a process hears the
datagram first (a notification takes a round trip through the server and its listener's
thread), and each wake-up, named by an id, is delivered once, whichever way comes second.
The database stays the truth: a waiter re-reads after a wake-up, and a slow poll covers
one that was lost (a listener reconnecting).

A process says which kinds of topic it hears (`job`, `tasks`, ...: a topic's part before
its first colon), and is sent only those: a claim's wake-up does not also wake every
other process, which on a machine of few cores would take the CPU the claim needs."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import trace
from services.core.wakeup_transports import Datagrams, Notifications, Transport, kind

log = logging.getLogger(__name__)


def job_topic(job_id: str) -> str:
    """A job's record grew (an event, a move)."""
    return f"job:{job_id}"


def queued_topic() -> str:
    """A job entered the queue (a create, a retry): a preparer takes it."""
    return "queued"


def claimable_topic(org: str, machine: str) -> str:
    """A task opened that the executors of `machine` in `org` may claim; for no machine,
    one the platform's executors may claim. Only those wake, not every executor."""
    return f"tasks:{org}:{machine}" if machine else "tasks:platform"


def executor_topic(executor_id: str) -> str:
    """A job whose task the executor holds wants it stopped."""
    return f"executor:{executor_id}"


def operations_topic(executor_id: str) -> str:
    """A training client the executor holds has a call to run (or answered one)."""
    return f"operations:{executor_id}"


def future_topic(client_id: str, seq: int) -> str:
    """A training client's call `seq` was answered."""
    return f"future:{client_id}:{seq}"


def mark(session: Session, *topics: str) -> None:
    """Publish `topics` once the session's transaction commits (never if it rolls back)."""
    session.info.setdefault("wakeups", set()).update(topics)


def marked(session: Session) -> set[str]:
    return set(session.info.pop("wakeups", ()))


# The wake-ups a process remembers hearing, to deliver one heard twice once.
_REMEMBERED = 4096


class Wakeups:
    """The topics this process's waiters watch, and the transport to the others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watching: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._transports: list[Transport] = []
        self._hears: frozenset[str] | None = None  # any kind, until connected
        # The topics delivered of each wake-up heard or sent lately, by its id.
        self._delivered: collections.OrderedDict[str, set[str]] = collections.OrderedDict()

    def connect(self, database_url: str, run_dir: Path, hears: Iterable[str]) -> None:
        """Hear the topics of the kinds in `hears` from, and be heard by, the other
        processes on the same machine and, on PostgreSQL, on the same database."""
        self._hears = frozenset(hears)
        self._transports = [Datagrams(run_dir / "wakeups", self._heard, self._hears)]
        if sa.engine.make_url(database_url).get_backend_name() == "postgresql":
            self._transports.append(Notifications(database_url, self._heard, self._hears))

    def close(self) -> None:
        for transport in self._transports:
            transport.close()
        self._transports = []

    def publish(self, topics: Iterable[str]) -> None:
        """After a commit, from any thread: wake every waiter on `topics`, everywhere."""
        topics = set(topics)
        if not topics:
            return
        trace.hop("wakeup.sent", topics=sorted(topics))
        ident = secrets.token_hex(8)
        self._remember(ident, topics)  # its own notification comes back: not again
        self.deliver(topics)
        for transport in self._transports:
            try:
                transport.send(ident, topics)
            except Exception:  # the waiters' poll covers it
                log.warning("wake-up not sent", exc_info=True)

    def _heard(self, ident: str, topics: Iterable[str]) -> None:
        """A wake-up another process sent: its topics not delivered yet, delivered."""
        fresh = self._remember(ident, topics) if ident else set(topics)
        if fresh:
            trace.hop("wakeup.received", topics=sorted(fresh))
            self.deliver(fresh)

    def _remember(self, ident: str, topics: Iterable[str]) -> set[str]:
        """Note `topics` of the wake-up `ident` as delivered; those that were not."""
        with self._lock:
            done = self._delivered.setdefault(ident, set())
            fresh = set(topics) - done
            done |= fresh
            while len(self._delivered) > _REMEMBERED:
                self._delivered.popitem(last=False)
        return fresh

    def deliver(self, topics: Iterable[str]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, set[asyncio.Event]] = {}
        with self._lock:
            for topic in topics:
                for loop, event in self._watching.get(topic, ()):
                    by_loop.setdefault(loop, set()).add(event)
        for loop, events in by_loop.items():
            # A loop's events are set in one callback: a waiter woken by one finds the
            # others a wake-up sets already set (a stream's claimer reads which were).
            with contextlib.suppress(RuntimeError):  # its loop has closed
                loop.call_soon_threadsafe(_set_all, events)

    @contextlib.contextmanager
    def watching(self, *topics: str, event: asyncio.Event | None = None) -> Iterator[asyncio.Event]:
        """An event (`event`, or a new one) set whenever one of `topics` is published while
        the block runs. Clear it before reading, so a wake-up during the read is not lost."""
        unheard = {kind(t) for t in topics} - self._hears if self._hears is not None else ()
        if unheard:  # the other processes would never send it: a waiter would only poll
            raise ValueError(f"this process does not hear topics of kind {sorted(unheard)}")
        pair = (asyncio.get_running_loop(), event or asyncio.Event())
        with self._lock:
            for topic in topics:
                self._watching.setdefault(topic, set()).add(pair)
        try:
            yield pair[1]
        finally:
            with self._lock:
                for topic in topics:
                    waiters = self._watching.get(topic)
                    if waiters is not None:
                        waiters.discard(pair)
                        if not waiters:
                            del self._watching[topic]


def _set_all(events: Iterable[asyncio.Event]) -> None:
    for event in events:
        event.set()


async def woken(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` seconds pass; whether it was set. A cancel
    always ends the wait: Python 3.11's `asyncio.wait_for` drops one that comes as the
    event is set (an ended stream's claimer, cancelled so, went on claiming for nobody)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(timeout, 0.0)):
            await event.wait()
    return event.is_set()
