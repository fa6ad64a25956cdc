"""What an executor leaves of a task, and what its trainers are given: the rules behind
tests/e2e/test_security_host.py, case by case."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from executor.agent.workdir import discard, sweep, trainer_env
from trainyard.private import tighten_home, without_secrets


def task_dir(root: Path, name: str = "tsk_0123456789abcdef") -> Path:
    work = root / name
    (work / "output").mkdir(parents=True)
    for file in ("snapshot.jsonl", "task.json", "trainer.log", "lora-3.tar", "output/model.bin"):
        (work / file).write_text("rows")
    return work


def test_a_finished_task_leaves_nothing_and_a_failed_one_only_its_log_and_plan(
    tmp_path: Path,
) -> None:
    done, failed = task_dir(tmp_path, "tsk_done"), task_dir(tmp_path, "tsk_failed")
    discard(done, failed=False)
    discard(failed, failed=True)
    assert not done.exists()
    assert sorted(p.name for p in failed.iterdir()) == ["task.json", "trainer.log"]


def test_the_sweep_removes_old_work_no_one_holds_and_nothing_else(tmp_path: Path) -> None:
    old, held, fresh = (task_dir(tmp_path, f"tsk_{n}") for n in ("old", "held", "fresh"))
    client = task_dir(tmp_path, "cli_old")
    (tmp_path / "torch_extensions").mkdir()
    day_ago = time.time() - 86_400
    for work in (old, held, client, tmp_path / "torch_extensions"):
        for path in [work, *work.iterdir()]:
            os.utime(path, (day_ago, day_ago))
    assert sweep(tmp_path, 3600, held={"tsk_held"}) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "torch_extensions",
        "tsk_fresh",
        "tsk_held",
    ]
    assert fresh.exists()


def test_a_trainer_gets_no_credential_of_the_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    held = {
        "TRAINYARD_API_KEY": "ty_a", "TRAINYARD_SERVICE_KEY": "ty_b", "TRAINYARD_MASTER_KEY": "00",
        "TRAINYARD_S3_SECRET_KEY": "s", "TRAINYARD_S3_ACCESS_KEY": "a",
        "TRAINYARD_DATABASE_URL": "postgresql://u:p@h/d", "AWS_SECRET_ACCESS_KEY": "s",
        "PGPASSWORD": "p", "HF_TOKEN": "t",
    }  # fmt: skip
    needed = {"TRAINYARD_HOME": "/h", "TRAINYARD_MODELS_DIR": "/m", "OMP_NUM_THREADS": "2"}
    for name, value in {**held, **needed}.items():
        monkeypatch.setenv(name, value)
    env = trainer_env(Path("/work"), {"CUDA_VISIBLE_DEVICES": "0"})
    assert held.keys() & env.keys() == set()
    assert needed.items() <= env.items() and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert without_secrets({"PATH": "/bin", "TOKENIZERS_PARALLELISM": "false"}) == {
        "PATH": "/bin", "TOKENIZERS_PARALLELISM": "false"
    }  # fmt: skip


def test_a_home_left_open_is_closed_and_a_database_elsewhere_too(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "db"
    for directory in (home, home / "run", elsewhere):
        directory.mkdir(mode=0o755)
    for file in (home / "admin.key", elsewhere / "t.db", elsewhere / "t.db-wal"):
        file.write_text("x")
        file.chmod(0o644)
    tighten_home(home, elsewhere / "t.db")
    modes = {
        p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode)
        for p in (
            home,
            home / "run",
            home / "admin.key",
            elsewhere / "t.db",
            elsewhere / "t.db-wal",
        )
    }
    assert modes == {
        "home": 0o700, "home/run": 0o700, "home/admin.key": 0o600, "db/t.db": 0o600,
        "db/t.db-wal": 0o600,
    }  # fmt: skip
