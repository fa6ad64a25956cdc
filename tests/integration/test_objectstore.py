"""The object store restarted on the same home: once `wait_ready` returns, every object
stored before reads back, every time."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import httpx

from infra.objectstore import SeaweedFS
from infra.procs import Output
from services.artifacts.crypto import object_key
from services.artifacts.objects import ObjectStore
from services.core.config import Config

RESTARTS = 10
# Small objects and one past the filer's 4 MiB chunk size, so its bytes span several chunks.
SIZES = (1, 1000, 64 * 1024, 700_000, 5 * 1024 * 1024 + 3)


def test_every_object_reads_back_after_each_kill_and_restart(tmp_path: Path) -> None:
    with (tmp_path / "weed.log").open("w") as log:
        store = SeaweedFS(tmp_path / "home", Output(log))
        try:
            store.wait_ready("trainyard")
            config = dataclasses.replace(
                Config.from_env({"TRAINYARD_HOME": str(tmp_path / "home")}),
                s3_endpoint=store.endpoint,
                s3_access_key=store.access_key,
                s3_secret_key=store.secret_key,
            )
            objects = ObjectStore(config)
            org_key = os.urandom(32)
            stored: dict[str, bytes] = {}
            # Plain HTTP, no retries: one refused read is a failure, as it is for a user.
            with httpx.Client(timeout=30) as http:
                for size in SIZES:
                    body = os.urandom(size)
                    sha = hashlib.sha256(body).hexdigest()
                    # Written as an executor writes an output: a presigned PUT under SSE-C.
                    put = objects.presign_put(
                        "acme", sha, size, object_key(org_key, sha), "application/x-tar", 600
                    )
                    r = http.put(put.url, content=body, headers=put.headers)
                    assert r.status_code == 200, r.text
                    stored[sha] = body

                failures: list[str] = []
                for restart in range(1, RESTARTS + 1):
                    store.child.kill()
                    store.start()
                    store.wait_ready("trainyard")
                    for sha, body in stored.items():
                        got = objects.presign_get("acme", sha, object_key(org_key, sha), 600)
                        r = http.get(got.url, headers=got.headers)
                        if r.status_code != 200 or r.content != body:
                            failures.append(
                                f"restart {restart}: {sha[:8]} answered {r.status_code}"
                            )
            assert failures == []
        finally:
            store.stop()


def test_its_sockets_live_under_its_home_and_none_is_left_in_tmp(tmp_path: Path) -> None:
    with (tmp_path / "weed.log").open("w") as log:
        store = SeaweedFS(tmp_path / "home", Output(log))
        try:
            store.wait_ready("trainyard")
            run = tmp_path / "home" / "seaweedfs" / "run"
            assert sorted(p.name for p in run.iterdir()) == ["filer.sock", "s3.sock"]
            assert run.stat().st_mode & 0o777 == 0o700
            config = tmp_path / "home" / "seaweedfs" / "config"
            assert {p.stat().st_mode & 0o777 for p in config.iterdir()} == {0o600}
            assert config.stat().st_mode & 0o777 == 0o700
        finally:
            store.stop()
    ports = {str(port) for port in store.ports.values()}
    left = [
        p.name for p in Path("/tmp").glob("seaweedfs-*.sock") if p.stem.rsplit("-", 1)[-1] in ports
    ]
    assert left == []
