"""Every shell and Python snippet in the README runs as written against a stack started as
`make up` starts it, in the README's order, as a user who followed it would run them:
in a directory holding the checkout's `.venv` and `examples/` and the stack's `.trainyard`,
with `TRAINYARD_API_KEY` the admin key "Try it" exports. The one change made to a snippet
is the gateway's port (the test's stack binds a free one, not 8080). A snippet the test
cannot run says why in an HTML comment just above it (`<!-- not run: … -->`)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import BIN, StackProcess

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(
    r"(<!-- not run: (?P<why>[^>]*) -->\s*\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S
)


@dataclasses.dataclass(frozen=True)
class Snippet:
    line: int
    lang: str
    code: str
    skipped: str

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang})"


def snippets() -> list[Snippet]:
    text = README.read_text()
    return [
        Snippet(text.count("\n", 0, m.start("code")), m["lang"], m["code"], m["why"] or "")
        for m in FENCE.finditer(text)
        if m["lang"] in ("sh", "python")
    ]


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackProcess, Path]]:
    """A stack of the README's own (its org `default` and its keys), and the directory
    the user works in."""
    stack = StackProcess(tmp_path_factory.mktemp("readme") / "home").start()
    work = tmp_path_factory.mktemp("user")
    (work / ".venv").symlink_to(BIN.parent)
    (work / "examples").symlink_to(ROOT / "examples")
    (work / ".trainyard").symlink_to(stack.home)
    try:
        yield stack, work
    finally:
        stack.stop()


def test_the_readme_has_snippets_and_each_not_run_says_why() -> None:
    found = snippets()
    assert len([s for s in found if not s.skipped]) >= 10
    assert all(s.skipped.strip() for s in found if s.skipped)


# Run before each shell snippet: what it sets is kept for the next ones, as in one shell,
# and a call the service refuses fails the snippet (curl alone would print the refusal).
PROLOGUE = 'set -a\ncurl() { command curl --fail-with-body "$@"; }\n'


@dataclasses.dataclass
class Shell:
    """The user's one shell across the snippets: its environment so far, and the first
    snippet that failed (the ones after it would fail for its sake, not their own)."""

    stack: StackProcess
    work: Path
    env: dict[str, str]
    failed: Snippet | None = None


@pytest.fixture(scope="module")
def shell(user: tuple[StackProcess, Path]) -> Shell:
    stack, work = user
    env = {
        **stack.env,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "TRAINYARD_URL": stack.url,
        "TRAINYARD_API_KEY": stack.admin_key(),
    }
    env.pop("VIRTUAL_ENV", None)
    return Shell(stack, work, env)


# One item a snippet, in the README's order, so a failure names its snippet.
@pytest.mark.parametrize(
    "snippet", [s for s in snippets() if not s.skipped], ids=lambda s: f"line{s.line}-{s.lang}"
)
def test_the_readme_snippet_runs_as_written(shell: Shell, snippet: Snippet) -> None:
    if shell.failed is not None:
        pytest.skip(f"{shell.failed} failed before it")
    shell.failed = snippet
    kept = shell.work / ".snippet-env"
    code = re.sub(r"(127\.0\.0\.1|localhost):8080", f"127.0.0.1:{shell.stack.port}", snippet.code)
    if snippet.lang == "sh":
        argv = ["bash", "-euo", "pipefail", "-c", f"{PROLOGUE}{code}\nenv -0 > {kept}\n"]
    else:
        argv = [str(shell.work / ".venv" / "bin" / "python"), "-c", code]
    done = subprocess.run(
        argv, cwd=shell.work, env=shell.env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{snippet} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if snippet.lang == "sh":
        pairs = (item.split("=", 1) for item in kept.read_text().split("\0") if "=" in item)
        shell.env = dict(pairs)  # type: ignore[arg-type]
    shell.failed = None
