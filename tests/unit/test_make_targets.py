"""Each make target a fresh clone runs installs what it then uses: CI starts with
`make lint` on a checkout with no .venv and no node_modules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def planned(target: str) -> list[str]:
    """What `make TARGET` would run with nothing installed (`-B`: every prerequisite
    is out of date; `-n`: nothing runs)."""
    return subprocess.run(
        ["make", "-n", "-B", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("target", ["up", "test", "lint"])
def test_a_target_installs_the_python_packages_and_the_npm_packages(target: str) -> None:
    lines = planned(target)
    assert any("pip install -qq -e" in line for line in lines)
    assert any(line.startswith("npm ci") for line in lines)


def test_make_lint_installs_buf_before_it_runs_it() -> None:
    lines = planned("lint")
    assert first(lines, "npm ci") < first(lines, "node_modules/.bin/buf lint")
