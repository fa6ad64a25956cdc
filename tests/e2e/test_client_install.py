"""The client as a user installs it alone: the wheel built from the checkout, in a fresh
virtual environment with only its base dependencies (infra/client-wheel.sh), lists the
session stack's models through the gateway, has none of the server's or the trainer's
libraries, and its operator commands name the extra they need in one line.

CI builds the environment once before the suite and names it in TRAINYARD_CLIENT_VENV;
run alone, this module builds its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import StackProcess

ROOT = Path(__file__).resolve().parents[2]
LIST_MODELS = """
import json, sys, trainyard
from trainyard import sdk
with sdk.Client(sys.argv[1], sys.argv[2]) as client:
    names = [model.name for model in client.models()]
print(json.dumps({"package": trainyard.__file__, "models": names}))
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if built := os.environ.get("TRAINYARD_CLIENT_VENV"):
        return Path(built)
    where = tmp_path_factory.mktemp("client")
    subprocess.run(
        [str(ROOT / "infra" / "client-wheel.sh"), str(where)],
        env={**os.environ, "PYTHON": sys.executable},
        check=True,
        capture_output=True,
        timeout=600,
    )
    return where / "venv"


def run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command in the client's environment, away from the checkout: no PYTHONPATH and
    another working directory, so only the installed wheel can answer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRAINYARD_"))}
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_sdk_alone_lists_the_models(
    venv: Path, stack: StackProcess, member_key: str, tmp_path: Path
) -> None:
    done = run(
        venv, str(venv / "bin" / "python"), "-c", LIST_MODELS, stack.url, member_key, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert Path(answer["package"]).is_relative_to(venv)
    assert "fixture-tiny-llm" in answer["models"]


def test_the_client_has_no_server_or_trainer_library(venv: Path, tmp_path: Path) -> None:
    probe = (
        "import importlib.util as u; print([m for m in ('torch', 'deepspeed', 'transformers',"
        " 'peft', 'safetensors', 'sqlalchemy', 'alembic', 'boto3', 'envoy') if u.find_spec(m)])"
    )
    done = run(venv, str(venv / "bin" / "python"), "-c", probe, cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


@pytest.mark.parametrize(
    ("command", "extras"),
    [
        (["up"], "server,executor"),
        (["admin", "create-key", "--org", "acme"], "server"),
        (["status"], "server"),
        (["executor", "--help"], "executor"),
        (["models", "export", "fixture-tiny-llm"], "executor"),
    ],
)
def test_an_operator_command_names_its_extra(
    venv: Path, tmp_path: Path, command: list[str], extras: str
) -> None:
    done = run(venv, str(venv / "bin" / "trainyard"), *command, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.endswith(f"pip install 'trainyard[{extras}]'\n")
    assert done.stderr.count("\n") == 1


def test_the_help_lists_every_command(venv: Path, tmp_path: Path) -> None:
    done = run(venv, str(venv / "bin" / "trainyard"), "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.split("Commands:")[1].splitlines() if line}
    assert {"jobs", "models", "clients", "up", "admin", "status", "executor"} <= listed


def test_an_org_admin_manages_its_keys_from_the_client_alone(
    venv: Path, stack: StackProcess, tmp_path: Path
) -> None:
    """`admin keys` is the client's, over the API: no server extra needed."""
    admin = stack.create_key(f"client-{os.urandom(3).hex()}", "admin")
    trainyard = str(venv / "bin" / "trainyard")
    base = (trainyard, "--url", stack.url, "--api-key", admin, "admin", "keys")
    made = run(venv, *base, "create", "--role", "member", "--secret-only", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    listed = run(venv, *base, "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert " member " in listed.stdout and " admin " in listed.stdout
    assert made.stdout.strip() not in listed.stdout
