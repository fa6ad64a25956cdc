"""The CLI as a user meets it with no stack running: it names the URL it tried and how to
start one, and exits with the code `--help` documents."""

from __future__ import annotations

import os
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


def test_admin_commands_refuse_a_home_with_no_stack(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Run away from the stack's home, `admin create-key` would make a store of its own
    and print a key the stack rejects: it refuses and makes nothing."""
    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path / "elsewhere")}
    env.pop("TRAINYARD_DATABASE_URL", None)
    for argv in (
        ["create-key", "--org", "acme", "--role", "member"],
        ["credit", "--org", "acme", "--amount", "5", "--name", "inv-1"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "trainyard.cli", "admin", *argv],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "no Trainyard store here" in done.stderr and "make up" in done.stderr
        assert not done.stdout  # no key printed
    assert list(tmp_path.iterdir()) == []
