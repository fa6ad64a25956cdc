"""Backup and restore as an operator runs them: `trainyard backup` while the stack trains,
`trainyard restore` into a new home, the stack started there, and everything the backup
held reads back over REST and verifies; a corrupt, cut short or foreign archive is refused
and writes nothing. On SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.stack import postgres_schema
from tests.conftest import PG_URL
from tests.e2e.test_artifacts_rest import ROWS, upload
from tests.support import BIN, StackProcess, bearer, wait_for_job

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
    "hyperparameters": {"max_steps": 3},
}


def events(client: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    found, after = [], 0
    while True:
        page = client.get(f"/v1/train/jobs/{job_id}/events", params={"after": after}).json()
        found.extend(page["events"])
        if not page["events"]:
            return found
        after = page["next_after"]


def ledger(client: httpx.Client) -> list[dict[str, Any]]:
    entries, token = [], ""
    while True:
        page = client.get("/v1/train/ledger", params={"page_token": token} if token else {}).json()
        entries.extend(page["entries"])
        if not (token := page.get("next_page_token", "")):
            return entries


def restore(
    archive: Path, home: Path, *, key_file: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "trainyard"), "restore", str(archive), "--master-key-file", str(key_file)],
        env={**env, "TRAINYARD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


@contextlib.contextmanager
def new_store(kind: str, home: Path) -> Iterator[dict[str, str]]:
    """The environment naming a new, empty store of the same kind for a restore."""
    if kind == "sqlite":
        yield {}
        return
    with postgres_schema(PG_URL) as url:
        yield {"TRAINYARD_DATABASE_URL": url}


def test_a_backup_taken_while_training_restores_into_a_new_home_whole(
    each_stack: StackProcess, tmp_path: Path
) -> None:
    stack = each_stack
    kind = "postgresql" if "TRAINYARD_DATABASE_URL" in stack.env else "sqlite"
    key = stack.create_key(f"backup-{kind[:2]}", "member")
    client = httpx.Client(base_url=stack.url, headers=bearer(key), timeout=60)
    dataset = upload(client, ROWS)
    done = client.post("/v1/train/jobs", json=JOB).json()
    done = wait_for_job(client, done["id"], lambda j: j["status"] in ("succeeded", "failed"))
    assert done["status"] == "succeeded", done
    # Another job trains while the backup is taken.
    busy = client.post("/v1/train/jobs", json={**JOB, "hyperparameters": {"max_steps": 40}})
    busy_id = busy.json()["id"]
    wait_for_job(client, busy_id, lambda j: j.get("progress", {}).get("step", 0) >= 1)

    # Stored before the backup began, so in its snapshot.
    source_artifacts = [
        a for a in client.get("/v1/train/artifacts").json()["artifacts"] if a["status"] == "stored"
    ]
    archive = tmp_path / "trainyard.backup"
    made = stack.cli("backup", str(archive))
    assert made.stdout.splitlines()[-1].startswith(f"backup written: {archive}"), made.stdout
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    # The archive holds no object in the clear.
    assert ROWS not in archive.read_bytes()
    # What the source held at the backup, read now (the finished job no longer moves).
    source_job, source_events = (
        client.get(f"/v1/train/jobs/{done['id']}").json(),
        events(client, done["id"]),
    )

    home = tmp_path / "restored" / "home"
    with new_store(kind, home) as store_env:
        env = {k: v for k, v in stack.env.items() if k != "TRAINYARD_DATABASE_URL"} | store_env
        # A cut-short, a corrupt and a foreign archive are refused, and the home stays empty.
        bad = tmp_path / "bad"
        bad.mkdir()
        blob = archive.read_bytes()
        (bad / "short").write_bytes(blob[: len(blob) // 2])
        flipped = bytearray(blob)
        flipped[len(blob) // 3] ^= 0xFF
        (bad / "flipped").write_bytes(bytes(flipped))
        other_key = bad / "other.key"
        other_key.write_text(hashlib.sha256(b"another deployment").hexdigest())
        for archive_, key_file, said in [
            (bad / "short", stack.home / "master.key", "cut short"),
            (bad / "flipped", stack.home / "master.key", "corrupt"),
            (archive, other_key, "another master key"),
        ]:
            refused = restore(archive_, home, key_file=key_file, env=env)
            assert refused.returncode == 1 and said in refused.stderr, refused.stderr
            assert not home.exists()
        restored = restore(archive, home, key_file=stack.home / "master.key", env=env)
        assert restored.returncode == 0, restored.stderr
        again = StackProcess(home, env={**store_env, "TRAINYARD_LOCAL_EXECUTOR": "0"}).start()
        try:
            back = httpx.Client(base_url=again.url, headers=bearer(key), timeout=60)
            # The job that had ended reads back whole, with every event of its record.
            assert back.get(f"/v1/train/jobs/{done['id']}").json() == source_job
            assert events(back, done["id"]) == source_events
            # The job that was training reads back as the snapshot caught it: its record
            # is the start of the one the source went on writing.
            caught = events(back, busy_id)
            assert caught and caught == events(client, busy_id)[: len(caught)]
            # Every ledger entry restored is the source's, the finished job's among them.
            restored_ledger = ledger(back)
            source_ledger = {e["name"]: e for e in ledger(client)}
            assert restored_ledger and all(source_ledger[e["name"]] == e for e in restored_ledger)
            # Every artifact reads back by its URL alone and hashes to its name.
            listed = back.get("/v1/train/artifacts").json()["artifacts"]
            # (An output granted and not yet confirmed at the snapshot is listed pending.)
            artifacts = [a for a in listed if a["status"] == "stored"]
            assert {a["sha256"] for a in artifacts} >= {a["sha256"] for a in source_artifacts}
            assert dataset in {a["sha256"] for a in artifacts}
            for artifact in artifacts:
                url = back.get(f"/v1/train/artifacts/{artifact['sha256']}").json()["url"]
                body = httpx.get(url, timeout=60).content
                assert hashlib.sha256(body).hexdigest() == artifact["sha256"]
            # The restored store is at this code's schema, and says so.
            assert "schema " in again.cli("status", check=False).stdout
            back.close()
        finally:
            again.stop()
    # The source's busy job has served its purpose: it stops training beside later tests.
    client.post(f"/v1/train/jobs/{busy_id}/cancel")
    client.close()
