"""Choosing torch's CPU build: `make up TORCH=cpu` and the README install the pin the
project declares, from the PyTorch CPU wheel index, and the default install is unchanged."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def pinned_torch() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [d for extra in project["optional-dependencies"].values() for d in extra]
    (pin,) = {d for d in [*project["dependencies"], *deps] if d.startswith("torch==")}
    return pin


def planned(*args: str) -> str:
    """What `make up` would run on a fresh checkout (nothing runs: `make -n`)."""
    return subprocess.run(
        ["make", "-n", "up", "VENV=/nonexistent-venv", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_make_up_torch_cpu_installs_the_pinned_cpu_build_first() -> None:
    lines = planned("TORCH=cpu").splitlines()
    cpu = next(i for i, line in enumerate(lines) if CPU_INDEX in line and "pip install" in line)
    editable = next(i for i, line in enumerate(lines) if "pip install -qq -e" in line)
    assert f"'{pinned_torch()}+cpu' --index-url {CPU_INDEX}" in lines[cpu]
    assert cpu < editable


def test_make_up_says_what_it_installs_and_by_default_asks_pypi_alone() -> None:
    plan = planned()
    assert "download.pytorch.org" not in plan
    assert "installing Trainyard's Python packages" in plan


def test_the_readme_names_the_pinned_torch_and_the_cpu_index() -> None:
    readme = (ROOT / "README.md").read_text()
    assert re.search(
        rf"'{re.escape(pinned_torch())}\+cpu' --index-url {re.escape(CPU_INDEX)}", readme
    )
    assert "make up TORCH=cpu" in readme
