"""The package boundaries ARCHITECTURE.md draws, read from every import in the code (at
the top of a module or inside a function, absolute or relative):

- the client, `trainyard/sdk*.py` and `trainyard/cli*.py`, imports only `trainyard`; the
  rest of `trainyard` (the generated stubs, `trainyard.training`, the small helpers) is
  shared by every side and imports nothing of the project but that shared code;
- the server side (`services`, `infra`, `executor`, `gateway`) never imports the client;
- a service talks to another over gRPC and shares only `services.core`;
- the executor and the gateway import only themselves and the shared code;
- `infra`, the operator's tooling, runs the whole deployment through the services' public
  entry points only: `services.core` (config, store, auth, audit, the shared states and
  ledger: what every service is built on) and each service's `server`, never a
  service's own modules.

Importing the SDK and the CLI loads no training or database library, so the client
installs alone (pyproject.toml's base dependencies)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("trainyard", "services", "executor", "infra", "gateway")
CLIENT = re.compile(r"trainyard\.(sdk|cli)(_\w+)?(\.|$)")
SERVERS = {f"services.{path.parent.name}.server" for path in ROOT.glob("services/*/server.py")}


def room(name: str) -> str:
    """The part of the project a dotted module (or module.attribute) name lies in."""
    parts = name.split(".")
    if CLIENT.match(name):
        return "client"
    if parts[0] == "services" and len(parts) > 1:
        if parts[1] == "core":
            return "services.core"
        return ".".join(parts[:3] if parts[2:3] == ["server"] else parts[:2])
    return parts[0]


def allowed(module: str) -> set[str]:
    """The rooms a module may import from."""
    own = room(module)
    if own == "client":
        return {"client", "trainyard"}
    if own in ("trainyard", "executor", "gateway"):
        return {"trainyard", own}
    if own == "services.core":
        return {"trainyard", "services.core"}
    if own.startswith("services."):
        service = ".".join(module.split(".")[:2])
        return {"trainyard", "services.core", service, f"{service}.server"}
    if own == "infra":
        return {"trainyard", "gateway", "infra", "services.core", *SERVERS}
    raise AssertionError(module)


def imports(path: Path, module: str) -> set[str]:
    """Every project name the file imports, absolute, as `module` or `module.name`."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            # `from trainyard import sdk` names the module as much as `import trainyard.sdk`.
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PROJECT}


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> list[Path]:
    return sorted(
        path
        for package in PROJECT
        for path in (ROOT / package).rglob("*.py")
        if "_pb2" not in path.name and "migrations" not in path.parts
    )


def crossings(path: Path) -> set[str]:
    module = module_of(path)
    return {name for name in imports(path, module) if room(name) not in allowed(module)}


def test_every_package_is_walked() -> None:
    walked = {path.relative_to(ROOT).parts[0] for path in sources()}
    assert walked == set(PROJECT)


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_crosses_a_boundary(path: Path) -> None:
    assert crossings(path) == set(), f"{module_of(path)} imports across a boundary"


@pytest.mark.parametrize(
    ("module", "name", "expected"),
    [
        ("executor.agent", "trainyard.sdk_base.channel", True),
        ("services.jobs.create", "trainyard.cli", True),
        ("trainyard.training.catalog", "trainyard.sdk.Client", True),
        ("trainyard.cli", "trainyard.sdk", False),
        ("trainyard.sdk", "services.core.config", True),
        ("infra.objectstore", "services.artifacts.objects.s3_client", True),
        ("infra.objectstore", "services.core.s3.client", False),
        ("infra.stack", "services.core.store.open_store", False),
        ("infra.stack", "services.jobs.server", False),
        ("services.jobs.create", "services.meter.server", True),
        ("services.jobs.create", "services.jobs.server", False),
        ("services.jobs.create", "trainyard.training.catalog", False),
    ],
)
def test_the_rule_tells_a_crossing(module: str, name: str, expected: bool) -> None:
    assert (room(name) not in allowed(module)) is expected


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    source = tmp_path / "runner.py"
    source.write_text("from ..trainyard import sdk\nfrom . import agent\nfrom .x import y\n")
    assert imports(source, "executor.run.runner") == {
        "executor.trainyard.sdk",
        "executor.run.agent",
        "executor.run.x.y",
    }


def test_the_client_loads_no_training_or_database_library() -> None:
    heavy = ("torch", "deepspeed", "transformers", "peft", "safetensors", "sqlalchemy", "boto3")
    probe = (
        "import sys, json, trainyard.sdk, trainyard.cli; "
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == []
