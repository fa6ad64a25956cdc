"""How a wake-up reaches the other processes (`services.core.wakeups`): signed loopback
datagrams to those of the same machine, and PostgreSQL's `LISTEN/NOTIFY` to every replica
on the database. A message names its wake-up by an id on its first line, then its topics,
one a line."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import psycopg
import sqlalchemy as sa
from psycopg import sql

log = logging.getLogger(__name__)

_SEPARATOR = "\n"
LISTEN_SECONDS = 5.0
# A wake-up's id and its topics, as a transport hears them ("" : a sender that named none).
Heard = Callable[[str, Iterable[str]], None]
# A message's first line when it names its wake-up (a topic never starts so).
_ID_MARK = "#"


def kind(topic: str) -> str:
    """What a topic is about: the part a process declares it hears."""
    return topic.partition(":")[0]


class Transport(Protocol):
    def send(self, ident: str, topics: Iterable[str]) -> None: ...
    def close(self) -> None: ...


class Datagrams:
    """Processes on one machine: each receives on a loopback UDP port written as a file
    (`<port>`, holding its pid) in a shared directory, beside the kinds of topic it hears
    (`<port>.hears`; a process without one hears every kind, as before there were kinds);
    a sender sends each other process the topics it hears. Each datagram carries an HMAC
    under the directory's `secret`: one without it is dropped."""

    RESCAN_SECONDS = 1.0

    def __init__(self, directory: Path, heard: Heard, hears: frozenset[str]) -> None:
        self._directory = directory
        self._heard = heard
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
        self._secret = _secret(directory / SECRET_FILE)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._port = int(self._socket.getsockname()[1])
        self._file = directory / str(self._port)
        # What it hears first: a peer that finds its port finds that too.
        _hears_file(self._file).write_text(" ".join(sorted(hears)))
        self._file.write_text(str(os.getpid()))
        self._sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._peers: list[tuple[int, frozenset[str] | None]] = []
        self._scanned = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._receive, name="wakeups", daemon=True)
        self._thread.start()

    def send(self, ident: str, topics: Iterable[str]) -> None:
        topics = list(topics)
        for port, hears in self._ports():
            heard = topics if hears is None else [t for t in topics if kind(t) in hears]
            for payload in _payloads(ident, heard, DATAGRAM_BYTES):
                body = payload.encode()
                with contextlib.suppress(OSError):
                    self._sender.sendto(self._tag(body) + body, ("127.0.0.1", port))

    def _ports(self) -> list[tuple[int, frozenset[str] | None]]:
        """The other processes' ports and the kinds each hears, read again at most once a
        second (a process started since is heard within that); files of processes that
        died are removed."""
        now = time.monotonic()
        if now - self._scanned >= self.RESCAN_SECONDS:
            peers = []
            for path in self._directory.iterdir():
                if not path.name.isdigit() or path == self._file:
                    continue
                if _alive(path):
                    peers.append((int(path.name), _heard_by(path)))
                else:
                    path.unlink(missing_ok=True)
                    _hears_file(path).unlink(missing_ok=True)
            self._peers, self._scanned = peers, now
        return self._peers

    def _receive(self) -> None:
        while not self._closed:
            try:
                payload = self._socket.recv(65536)
            except OSError:
                return
            tag, body = payload[:TAG_BYTES], payload[TAG_BYTES:]
            if body and hmac.compare_digest(tag, self._tag(body)):
                self._heard(*_parse(body.decode(errors="replace")))

    def _tag(self, body: bytes) -> bytes:
        return hmac.digest(self._secret, body, hashlib.sha256)

    def close(self) -> None:
        self._closed = True
        self._file.unlink(missing_ok=True)
        _hears_file(self._file).unlink(missing_ok=True)
        # A datagram to itself ends the blocking receive.
        with contextlib.suppress(OSError):
            self._sender.sendto(b"", ("127.0.0.1", self._port))
        self._thread.join(2)
        self._socket.close()
        self._sender.close()


SECRET_FILE = "secret"
TAG_BYTES = 32


def _secret(path: Path) -> bytes:
    """The key the processes sharing `path`'s directory sign their datagrams with: made by
    the first (0600, linked into place whole, so every process reads the same one)."""
    if not path.exists():
        made = path.with_name(f".{SECRET_FILE}-{os.getpid()}-{secrets.token_hex(4)}")
        fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
        with contextlib.suppress(FileExistsError):
            os.link(made, path)
        made.unlink()
    return path.read_bytes()


def _alive(path: Path) -> bool:
    try:
        os.kill(int(path.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def _hears_file(port_file: Path) -> Path:
    return port_file.with_name(f"{port_file.name}.hears")


def _heard_by(port_file: Path) -> frozenset[str] | None:
    """The kinds a peer hears; None: every kind (it names none)."""
    try:
        return frozenset(_hears_file(port_file).read_text().split())
    except FileNotFoundError:
        return None


class Notifications:
    """PostgreSQL's `LISTEN/NOTIFY`: heard by every replica on the database, on any host.
    A channel a kind of topic, named after the schema the tables live in too, since
    channels are the database's: deployments on schemas of one database do not wake each
    other, and a process listens only to the kinds it hears. The listener reconnects
    after a failure; what it missed meanwhile, the polls find.

    A sender thread notifies, so a unit of work returns without waiting on the round
    trip; the wake-ups published while it was busy go out together in one statement."""

    def __init__(self, database_url: str, heard: Heard, hears: frozenset[str]) -> None:
        url = sa.engine.make_url(database_url).set(drivername="postgresql")
        self._dsn = url.render_as_string(hide_password=False)
        self._heard = heard
        self._hears = hears
        self._sending: psycopg.Connection[Any] | None = None
        self._schema = ""
        self._outbox: queue.SimpleQueue[tuple[str, set[str]] | None] = queue.SimpleQueue()
        self._closed = threading.Event()
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="wakeups", daemon=True)
        self._thread.start()
        self._sender = threading.Thread(target=self._send_forever, name="wakeups-send", daemon=True)
        self._sender.start()
        # What commits once this returns is heard; a database slow to answer, the polls cover.
        self.listening.wait(LISTEN_SECONDS)

    def send(self, ident: str, topics: Iterable[str]) -> None:
        self._outbox.put((ident, set(topics)))

    def _send_forever(self) -> None:
        while (first := self._outbox.get()) is not None:
            waiting: list[tuple[str, set[str]]] = [first]
            more: tuple[str, set[str]] | None = first
            with contextlib.suppress(queue.Empty):
                while (more := self._outbox.get_nowait()) is not None:
                    waiting.append(more)
            messages = []
            for ident, topics in waiting:
                by_kind: dict[str, list[str]] = {}
                for topic in topics:
                    by_kind.setdefault(kind(topic), []).append(topic)
                messages += [
                    (name, payload)
                    for name, some in by_kind.items()
                    for payload in _payloads(ident, some, NOTIFICATION_BYTES)
                ]
            try:
                self._notify(messages)
            except Exception:  # the waiters' poll covers it
                log.warning("wake-up not sent", exc_info=True)
            if more is None:
                return

    def _notify(self, messages: list[tuple[str, str]]) -> None:
        """Each (kind, payload) on its kind's channel, in one statement: one round trip."""
        for _ in range(2):  # once more on a fresh connection if the kept one broke
            if self._sending is None:
                self._sending = psycopg.connect(self._dsn, autocommit=True)
                self._schema = _schema(self._sending)
            try:
                query = "SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(messages))
                params = [
                    value
                    for name, payload in messages
                    for value in (_channel(self._schema, name), payload)
                ]
                self._sending.execute(query, params)
                return
            except psycopg.OperationalError:
                with contextlib.suppress(Exception):
                    self._sending.close()
                self._sending = None

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    schema = _schema(conn)
                    for heard in sorted(self._hears):
                        channel = sql.Identifier(_channel(schema, heard))
                        conn.execute(sql.SQL("LISTEN {}").format(channel))
                    self.listening.set()
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._heard(*_parse(note.payload))
            except psycopg.Error:
                self.listening.clear()
                log.warning("wake-up listener lost its connection; reconnecting")
                self._closed.wait(1.0)

    def close(self) -> None:
        self._outbox.put(None)
        self._sender.join(3)
        self._closed.set()
        self._thread.join(3)
        if self._sending is not None:
            with contextlib.suppress(Exception):
                self._sending.close()
            self._sending = None


# What one message may carry: a notification stays under 8,000 bytes, a datagram 65,507.
NOTIFICATION_BYTES = 7_000
DATAGRAM_BYTES = 60_000


def _payloads(ident: str, topics: Iterable[str], limit: int) -> Iterator[str]:
    """The topics as messages of at most `limit` bytes, each naming the wake-up first."""
    head = _ID_MARK + ident
    batch: list[str] = [head]
    size = len(head) + 1
    for topic in sorted(topics):
        length = len(topic.encode()) + 1
        if len(batch) > 1 and size + length > limit:
            yield _SEPARATOR.join(batch)
            batch, size = [head], len(head) + 1
        batch.append(topic)
        size += length
    if len(batch) > 1:
        yield _SEPARATOR.join(batch)


def _parse(payload: str) -> tuple[str, list[str]]:
    """A message's wake-up id ("" when it names none: a sender of an earlier version)
    and topics."""
    lines = payload.split(_SEPARATOR)
    if lines[0].startswith(_ID_MARK):
        return lines[0][len(_ID_MARK) :], lines[1:]
    return "", lines


def _schema(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT current_schema()").fetchone()
    return str(row[0]) if row else "public"


def _channel(schema: str, topic_kind: str) -> str:
    """A kind's channel in the schema's deployment (a channel's name is at most 63 bytes:
    the schema's name, of any length, is hashed)."""
    return f"trainyard_{hashlib.sha256(schema.encode()).hexdigest()[:20]}_{topic_kind}"[:63]
