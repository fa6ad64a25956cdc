"""Ports: picked for programs that cannot bind port 0 and tell which they got (Envoy's
listener, SeaweedFS, the trainers' rendezvous), and published by those that can.

A port is picked below the kernel's ephemeral range. One inside it can be handed out, to
any connect or bind of port 0 on the machine, between the pick and the program's bind;
one below it is taken only by a bind that names it. A process does not hand out a port it
picked recently: a program is often given several at once, all picked before any is bound."""

from __future__ import annotations

import collections
import os
import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000  # below: the ports well-known servers are configured on
# The ports this process picked last: long since bound (or let go) by the time they drop out.
_given: collections.deque[int] = collections.deque(maxlen=1024)


def _picked_range() -> tuple[int, int]:
    try:
        ephemeral_low = int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768  # Linux's default
    return _LOWEST, ephemeral_low - 1


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, and that the kernel will not hand out meanwhile."""
    low, high = _picked_range()
    if high - low >= 1000:
        for _ in range(200):
            port = random.randint(low, high)
            if port not in _given and _bindable(host, port):
                _given.append(port)
                return port
    with socket.socket() as sock:  # no room below the range: any free one
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def publish_port(path: Path, port: int) -> Path:
    """Write `port` to `path` at once (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, path)
    return path
