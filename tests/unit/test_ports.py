"""Ports picked for programs that bind them later."""

from __future__ import annotations

import socket

from trainyard.ports import free_port


def test_ports_picked_together_are_all_different_and_bindable() -> None:
    # SeaweedFS gets eight at once, a stack a dozen more, all before any is bound.
    picked = [free_port() for _ in range(1000)]
    assert len(set(picked)) == len(picked)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", picked[-1]))
