"""Wake-ups between processes: a committed unit of work wakes the waiters on the topics it
marked, in another process (here: another transport on the same database and run
directory), and a rolled-back one wakes no one."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from services.core.store import Store, open_store
from services.core.wakeups import Wakeups, mark, woken

HEARS = ("job", "tasks")


@pytest.fixture
def pair(database_url: str, tmp_path: Path) -> Iterator[tuple[Store, Wakeups]]:
    """A store that publishes, and another process's wake-ups that hear it."""
    writer = open_store(database_url)
    writer.wakeups.connect(database_url, tmp_path / "run", HEARS)
    other = Wakeups()
    other.connect(database_url, tmp_path / "run", HEARS)
    try:
        yield writer, other
    finally:
        other.close()
        writer.wakeups.close()
        writer.dispose()


def commit(store: Store, *topics: str, fail: bool = False) -> None:
    """A unit of work that marks `topics`; rolled back when `fail`."""
    refused = pytest.raises(RuntimeError) if fail else contextlib.nullcontext()
    with refused, store.unit() as session:
        mark(session, *topics)
        if fail:
            raise RuntimeError("rolled back")


def test_a_commit_wakes_the_other_process_and_a_rollback_does_not(
    pair: tuple[Store, Wakeups],
) -> None:
    writer, other = pair

    async def scenario() -> None:
        with other.watching("job:a") as a, other.watching("job:b") as b:
            await asyncio.to_thread(commit, writer, "job:a", fail=True)
            await asyncio.to_thread(commit, writer, "job:b")
            await asyncio.wait_for(b.wait(), 10)
            # Wake-ups arrive in commit order: had the rollback sent one, it came first.
            assert not a.is_set()
            await asyncio.to_thread(commit, writer, "job:a", "tasks")
            await asyncio.wait_for(a.wait(), 10)

    asyncio.run(scenario())


def test_a_commit_of_more_topics_than_one_message_holds_wakes_them_all(
    pair: tuple[Store, Wakeups],
) -> None:
    """A sweep that ends thousands of jobs in one unit wakes each one's watchers."""
    writer, other = pair
    topics = [f"job:job_{n:026d}" for n in range(3_000)]  # about 100 kB of topics

    async def scenario() -> None:
        with other.watching(topics[0]) as first, other.watching(topics[-1]) as last:
            await asyncio.to_thread(commit, writer, *topics)
            await asyncio.wait_for(first.wait(), 10)
            await asyncio.wait_for(last.wait(), 10)

    asyncio.run(scenario())


class Heard(Wakeups):
    """Wake-ups that keep every topic another process sent them."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[str] = []

    def deliver(self, topics: Iterable[str]) -> None:
        topics = list(topics)
        self.heard.extend(topics)
        super().deliver(topics)


def test_a_process_is_sent_only_the_kinds_of_topic_it_hears(
    database_url: str, tmp_path: Path
) -> None:
    """A claim's wake-up goes to the processes that wait for claims, not to every process
    (each woken for nothing would take a core the claim needs)."""
    writer = open_store(database_url)
    writer.wakeups.connect(database_url, tmp_path / "run", ())
    jobs, claims = Heard(), Heard()
    jobs.connect(database_url, tmp_path / "run", ["job"])
    claims.connect(database_url, tmp_path / "run", ["tasks"])

    async def scenario() -> None:
        with jobs.watching("job:a") as a, claims.watching("tasks:acme:m1") as tasks:
            await asyncio.to_thread(commit, writer, "job:a", "tasks:acme:m1")
            await asyncio.wait_for(a.wait(), 10)
            await asyncio.wait_for(tasks.wait(), 10)
        # What was sent for one commit comes in one message: nothing else is on its way.
        assert jobs.heard == ["job:a"]
        assert claims.heard == ["tasks:acme:m1"]
        with pytest.raises(ValueError), jobs.watching("tasks:acme:m1"):
            pass  # it would never be sent one: refused, not left to a poll

    try:
        asyncio.run(scenario())
    finally:
        for wakeups in (claims, jobs, writer.wakeups):
            wakeups.close()
        writer.dispose()


class Arrivals(Heard):
    """Heard wake-ups that also count each copy a transport brings."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[list[str]] = []
        self._came = threading.Condition()

    def _heard(self, ident: str, topics: Iterable[str]) -> None:
        topics = list(topics)
        super()._heard(ident, topics)
        with self._came:
            self.copies.append(topics)
            self._came.notify_all()

    def wait_for(self, copies: int) -> bool:
        with self._came:
            return self._came.wait_for(lambda: len(self.copies) >= copies, timeout=10)


def test_a_wake_up_heard_both_ways_is_delivered_once(database_url: str, tmp_path: Path) -> None:
    """On PostgreSQL a process on the same machine hears a wake-up twice, by datagram and by
    NOTIFY; its waiters are woken once. A process's own notification wakes no one again."""
    writer = open_store(database_url)
    writer.wakeups.connect(database_url, tmp_path / "run", HEARS)
    other = Arrivals()
    other.connect(database_url, tmp_path / "run", HEARS)
    both = database_url.startswith("postgresql")
    try:
        commit(writer, "job:a")
        assert other.wait_for(2 if both else 1)
        assert other.copies == [["job:a"]] * (2 if both else 1)
        assert other.heard == ["job:a"]
        if both:
            other.publish({"job:b"})  # woken here at once, then by its notification
            assert other.wait_for(3)
            assert other.copies[2] == ["job:b"]
            assert other.heard == ["job:a", "job:b"]
    finally:
        other.close()
        writer.wakeups.close()
        writer.dispose()


def test_a_waiter_in_the_same_process_wakes_without_a_transport(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'local.db'}")

    async def scenario() -> None:
        with store.wakeups.watching("tasks") as tasks:
            await asyncio.to_thread(commit, store, "tasks")
            await asyncio.wait_for(tasks.wait(), 10)

    try:
        asyncio.run(scenario())
    finally:
        store.dispose()


def test_a_waiter_cancelled_as_its_event_is_set_stops_waiting() -> None:
    """A loop that waits on `woken` ends when cancelled, even as a wake-up sets its event
    in the same turn of the event loop (as a stream's claimer is cancelled at its end
    while its last report frees a slot): the cancel is not dropped for the wake-up."""

    async def scenario() -> tuple[bool, int]:
        event, passes = asyncio.Event(), 0

        async def waiter() -> None:
            nonlocal passes
            while True:
                event.clear()
                await woken(event, 10)
                passes += 1

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)  # it waits
        event.set()
        task.cancel()
        await asyncio.wait([task], timeout=5)
        return task.cancelled(), passes

    assert asyncio.run(scenario()) == (True, 0)


def test_a_dead_process_is_no_longer_sent_to(tmp_path: Path) -> None:
    """The file a process that died left behind is removed by the next sender."""
    run = tmp_path / "run"
    (run / "wakeups").mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = run / "wakeups" / "1"
    stale.write_text(gone.stdout.strip())
    sender = Wakeups()
    sender.connect(f"sqlite:///{tmp_path / 'x.db'}", run, HEARS)
    try:
        sender.publish({"tasks"})
        assert not stale.exists()
        assert [p.name for p in (run / "wakeups").iterdir()] != []  # its own stays
    finally:
        sender.close()
    # Only the secret the stack's processes sign with stays.
    assert [p.name for p in (run / "wakeups").iterdir()] == ["secret"]


def test_a_datagram_from_outside_the_stack_wakes_no_one(tmp_path: Path) -> None:
    """Any local process may send to a loopback port: one that does not hold the secret
    the stack's user keeps (0600 in a 0700 directory) wakes no one, whatever it sends."""
    run, url = tmp_path / "run", f"sqlite:///{tmp_path / 'w.db'}"
    writer = open_store(url)
    writer.wakeups.connect(url, run, HEARS)
    other = Wakeups()
    other.connect(url, run, HEARS)
    directory = run / "wakeups"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "secret").stat().st_mode) == 0o600
    ports = [int(p.name) for p in directory.iterdir() if p.name.isdigit()]

    async def scenario() -> None:
        with other.watching("job:a") as a, other.watching("job:b") as b:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as outsider:
                for port in ports:
                    for forged in (b"job:a", bytes(32) + b"job:a", b"x" * 32 + b"tasks\njob:a"):
                        outsider.sendto(forged, ("127.0.0.1", port))
            await asyncio.to_thread(commit, writer, "job:b")
            await asyncio.wait_for(b.wait(), 10)
            # Each datagram is taken in the order it came: the forged ones came first.
            assert not a.is_set()

    try:
        asyncio.run(scenario())
    finally:
        other.close()
        writer.wakeups.close()
        writer.dispose()
