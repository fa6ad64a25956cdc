"""What the stack leaves on its host, attacked as another local user would: the home, the
database and the executor's work files are the stack's user's alone (read as `nobody`,
refused), an org's dataset is not left in the clear beside its encrypted copy once a job
is done, and neither the executor nor its trainers hold the stack's secrets."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.core.store import open_store
from tests.support import StackProcess, bearer, eventually, wait_for_job
from trainyard.training.datasets import fixture_rows

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    # Long enough that its work directory is seen while it trains, on a busy machine too.
    "hyperparameters": {"max_steps": 20},
}
# A row of the job's dataset, as its snapshot file holds it.
ROW = fixture_rows()[0].messages[0][1]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root")


def read_as_nobody(path: Path) -> subprocess.CompletedProcess[str]:
    """`cat path` as the unprivileged `nobody` (root reads any file whatever its mode)."""
    return subprocess.run(
        ["cat", str(path)], user="nobody", group="nogroup", extra_groups=[],
        capture_output=True, text=True, errors="replace", timeout=30,
    )  # fmt: skip


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[None]:
    """Every directory above `path` searchable by others while the block runs (pytest
    makes its temporary directories 0700), so only the stack's own modes stand between
    another user and what the stack wrote."""
    changed = []
    for parent in path.parents:
        mode = stat.S_IMODE(parent.stat().st_mode)
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
            changed.append((parent, mode))
    try:
        yield
    finally:
        for parent, mode in changed:
            parent.chmod(mode)


def open_to_others(root: Path) -> list[str]:
    """What under `root` (itself included) grants its group or others any access. SeaweedFS
    writes each volume's info file (`.vif`: its version and settings, no object's bytes)
    0644 whatever the umask; the home's 0700 keeps others from it."""
    found = []
    for path in [root, *root.rglob("*")]:
        if path.suffix == ".vif":
            continue
        with contextlib.suppress(FileNotFoundError):  # a file the stack removed meanwhile
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{path.relative_to(root)} {stat.filemode(mode)}")
    return found


def environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (a trainer, the warm trainer, an engine)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def snapshot_of(work_root: Path, job_id: str) -> Path | None:
    """The job's task's dataset rows, once its plan and rows are both in its directory."""
    for plan in work_root.glob("tsk_*/task.json"):
        with contextlib.suppress(FileNotFoundError):  # a task that ended meanwhile
            rows = plan.with_name("snapshot.jsonl")
            if job_id in plan.read_text() and rows.exists():
                return rows
    return None


def stack_secrets(stack: StackProcess) -> dict[str, bytes]:
    """What only the services may hold, as the jobs service was given it."""
    env = dict(
        line.split(b"=", 1) for line in environ(stack.info()["pids"]["jobs"]).split(b"\0") if line
    )
    found = {
        name: env[f"TRAINYARD_{name}".encode()]
        for name in ("S3_ACCESS_KEY", "S3_SECRET_KEY", "SERVICE_KEY", "DATABASE_URL")
    }
    found["master key"] = (stack.home / "master.key").read_bytes().strip()
    assert all(found.values()) and found["SERVICE_KEY"] in (stack.home / "service.key").read_bytes()
    return found


def test_the_executor_and_its_trainers_hold_no_secret_of_the_stack_and_leave_no_data(
    each_stack: StackProcess,
) -> None:
    stack, home = each_stack, each_stack.home
    secrets = stack_secrets(stack)
    executor = stack.info()["pids"]["executor"]

    def leaked(pid: int) -> list[str]:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # it ended meanwhile
            held = environ(pid)
            return [name for name, value in secrets.items() if value in held]
        return []

    # Its own key, a key row of its own: never the services' key.
    own = dict(line.split(b"=", 1) for line in environ(executor).split(b"\0") if b"=" in line)
    assert own[b"TRAINYARD_API_KEY"] == (home / "executor.key").read_bytes().strip()
    assert leaked(executor) == []
    idle = descendants(executor)  # the warm trainer, its imports done or under way
    assert {pid: found for pid in idle if (found := leaked(pid))} == {}

    client = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key("host")), timeout=60)
    job = client.post("/v1/train/jobs", json=JOB).json()
    work_root = home / "executor" / "local"
    # While it trains, the org's rows lie in its task's work directory: the trainer reads
    # them. Its plan names the job (other tests' failed tasks keep theirs a while).
    snapshot = eventually(
        lambda: snapshot_of(work_root, job["id"]),
        lambda found: found is not None,
        "the task's snapshot in its work directory",
        timeout=120,
    )
    assert snapshot is not None and ROW in snapshot.read_text()
    task_dir = snapshot.parent
    trainers = descendants(executor)
    assert trainers, "no trainer runs under the executor"
    assert {pid: found for pid in trainers if (found := leaked(pid))} == {}
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert open_to_others(home) == []

    done = wait_for_job(client, job["id"], lambda j: j["status"] in ("succeeded", "failed"))
    assert done["status"] == "succeeded" and done["model_available"] is True
    # Once its output is read back from the store, the task's directory goes with its rows.
    eventually(task_dir.exists, lambda left: not left, "the task's work directory left")
    clear = [
        str(path.relative_to(home))
        for path in home.rglob("*")
        if path.is_file()
        and not path.name.startswith("trainyard.db")
        and ROW.encode() in path.read_bytes()
    ]
    assert clear == []  # the store keeps its copy encrypted; the database keeps the rows


def test_the_executors_key_does_executor_work_and_nothing_else(each_stack: StackProcess) -> None:
    """A trainer that escapes into its executor holds that key: it reaches no service's
    internal calls (every org's publications, objects, holds) and no org's jobs."""
    executor_key = (each_stack.home / "executor.key").read_text().strip()
    services_key = (each_stack.home / "service.key").read_text().strip()
    org = {"x-org-id": "victim"}
    with httpx.Client(base_url=each_stack.url, timeout=60) as http:
        for path in ("/v1/train/published", "/v1/train/jobs", "/v1/train/artifacts"):
            refused = http.get(path, headers={**bearer(executor_key), **org})
            assert refused.status_code == 403, (path, refused.text)
        # The services' key reads the publications: the refusal is the role's.
        assert http.get("/v1/train/published", headers=bearer(services_key)).status_code == 200
        # Its own work, in any org: a report is let through to the task (none here).
        report = {"task": "tsk_0000000000000000", "lease": "x", "events": []}
        answered = http.post(
            "/v1/train/jobs/job_0000000000000000/events",
            json=report,
            headers={**bearer(executor_key), **org},
        )
        assert answered.status_code == 404, answered.text


@as_root
def test_another_user_reads_nothing_the_stack_wrote(each_stack: StackProcess) -> None:
    home = each_stack.home
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert open_to_others(home) == []
    targets = [home / "admin.key", home / "master.key", home / "run" / "stack.json"]
    if each_stack.database_url.startswith("sqlite"):
        targets.append(home / "trainyard.db")
        assert stat.S_IMODE((home / "trainyard.db").stat().st_mode) == 0o600
    with reachable(home):
        for target in targets:
            read = read_as_nobody(target)
            assert read.returncode != 0 and "Permission denied" in read.stderr, target.name
            assert read.stdout == ""


@as_root
def test_a_home_an_older_version_left_open_is_taken_back_at_start(tmp_path: Path) -> None:
    """A home made before files were private (0755, the database 0644): readable by any
    user until `trainyard up` starts on it."""
    home = tmp_path / "home"
    old = os.umask(0o022)
    try:
        home.mkdir()
        open_store(f"sqlite:///{home / 'trainyard.db'}").dispose()
    finally:
        os.umask(old)
    database = home / "trainyard.db"
    with reachable(home):
        assert read_as_nobody(database).stdout.startswith("SQLite format 3")  # the attack
        stack = StackProcess(home, env={"TRAINYARD_LOCAL_EXECUTOR": "0"}).start()
        try:
            assert stat.S_IMODE(home.stat().st_mode) == 0o700
            assert stat.S_IMODE(database.stat().st_mode) == 0o600
            assert open_to_others(home) == []
            read = read_as_nobody(database)
            assert read.returncode != 0 and "Permission denied" in read.stderr
        finally:
            stack.stop()
