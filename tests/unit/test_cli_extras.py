"""An operator's command installed without its extra: listed in the help with the extra
to install, and refused in one line naming it, whatever it is given. (Against the real
client-only wheel: tests/e2e/test_client_install.py.)"""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from click.testing import CliRunner

from trainyard import cli

POINTS = {
    "up": EntryPoint("up", "no_such_module_here.cli:up [server,executor]", "trainyard.commands"),
    "status": EntryPoint("status", "no_such_module_here.cli:status [server]", "trainyard.commands"),
}
UP = "trainyard up needs the server and executor extras: pip install 'trainyard[server,executor]'"
STATUS = "trainyard status needs the server extra: pip install 'trainyard[server]'"


@pytest.fixture(autouse=True)
def missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli._Commands, "_operated", staticmethod(lambda: POINTS))


@pytest.mark.parametrize(("args", "line"), [(["up"], UP), (["status", "--json", "--help"], STATUS)])
def test_a_command_without_its_extra_names_it_in_one_line(args: list[str], line: str) -> None:
    done = CliRunner().invoke(cli.main, args, prog_name="trainyard")
    assert (done.exit_code, done.stdout, done.stderr) == (2, "", line + "\n")


def test_the_help_lists_it_with_the_extra() -> None:
    done = CliRunner().invoke(cli.main, ["--help"], prog_name="trainyard")
    assert done.exit_code == 0
    assert "Not installed here: pip install 'trainyard[server,executor]'" in done.stdout


def test_a_missing_module_of_a_command_with_no_extra_is_a_bug_and_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = {"up": EntryPoint("up", "no_such_module_here.cli:up", "trainyard.commands")}
    monkeypatch.setattr(cli._Commands, "_operated", staticmethod(lambda: broken))
    done = CliRunner().invoke(cli.main, ["up"], prog_name="trainyard")
    assert isinstance(done.exception, ModuleNotFoundError)
