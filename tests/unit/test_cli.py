"""The CLI as a user meets it with no stack running: it names the URL it tried and how to
start one, and exits with the code `--help` documents."""

from __future__ import annotations

import subprocess
import sys

from trainyard.ports import free_port


def test_an_unreachable_gateway_is_named_with_how_to_start_the_stack() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "trainyard.cli", "--url", url, "models"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4
    assert url in done.stderr and "make up" in done.stderr
    assert "failed to connect" not in done.stderr  # no raw gRPC text


def test_help_documents_the_exit_codes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainyard.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "4 no gateway answered" in " ".join(done.stdout.split())
    assert "TRAINYARD_URL" in done.stdout
