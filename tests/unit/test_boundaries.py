"""The package boundaries ARCHITECTURE.md draws, read from every import in the code (at
the top of a module or inside a function): a service talks to another over gRPC and
shares only `services.core`; the executor and the user's SDK and CLI import no server
side; the neutral `trainyard` package imports nothing of the project but itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("trainyard", "services", "executor", "infra", "gateway")


def allowed(module: str) -> tuple[str, ...]:
    """The project packages a module may import."""
    if module.startswith("services.core"):
        return ("trainyard", "services.core")
    if module.startswith("services."):
        service = ".".join(module.split(".")[:2])
        return ("trainyard", "services.core", service)
    if module.startswith(("trainyard", "executor", "gateway")):
        return ("trainyard", module.split(".")[0])
    if module.startswith("infra"):  # the operator's tooling runs the whole deployment
        return ("trainyard", "services", "gateway", "infra")
    raise AssertionError(module)


def imports(path: Path) -> set[str]:
    """Every project module the file names in an import."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in PROJECT}


def sources() -> list[Path]:
    return sorted(
        path
        for package in PROJECT
        for path in (ROOT / package).rglob("*.py")
        if "_pb2" not in path.name and "migrations" not in path.parts
    )


def test_every_package_is_walked() -> None:
    walked = {path.relative_to(ROOT).parts[0] for path in sources()}
    assert walked == set(PROJECT)


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_crosses_a_boundary(path: Path) -> None:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    crossing = [
        name
        for name in imports(path)
        if not any(name == ok or name.startswith(ok + ".") for ok in allowed(module))
    ]
    assert crossing == [], f"{module} imports across a boundary"
