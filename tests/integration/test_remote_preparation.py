"""A remote dataset's preparation reads the bytes the create recorded or fails the job:
here an `hf://` file whose bytes changed under the commit the create pinned (a cache the
test builds, offline), on each store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from huggingface_hub import constants

from services.core.auth import Principal
from services.core.config import Config
from services.core.pagetoken import PageTokens
from services.core.store import Store
from services.jobs.server import use_cases
from tests.unit.test_remote_sources import REPO, commit_to_cache
from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import Catalog

ACME = Principal(key_id="key_0123456789abcdef", org="acme", role="member")
ROWS = b"".join(
    b'{"messages": [{"role": "user", "content": "q %d"}, {"role": "assistant", "content": "a %d"}]}\n'
    % (i, i)
    for i in range(12)
)


def test_bytes_changed_under_the_pinned_commit_fail_the_preparation(
    store: Store, config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    commit = commit_to_cache(tmp_path / "hub", "main", ROWS)
    service = use_cases(store, Catalog(), config, PageTokens(b"k" * 32))
    spec = {"base_model": "fixture-tiny-llm", "resources": {"machines": ["nowhere"]},
            "dataset": {"uri": f"hf://datasets/{REPO}/train/rows.jsonl"}}  # fmt: skip
    job, _ = service.creation.create(ACME, spec, job_pb2.Job())
    assert job.dataset.resolved_revision == commit
    assert job.dataset.source_sha256 == hashlib.sha256(ROWS).hexdigest()

    cached = tmp_path / "hub" / f"datasets--{REPO.replace('/', '--')}" / "snapshots" / commit
    (cached / "train" / "rows.jsonl").write_bytes(ROWS.replace(b"q 1", b"q X"))
    while service.preparation.prepare_next():
        pass
    failed = service.reads.get(ACME, job.id)
    assert (failed.status, failed.failure_code) == ("failed", "source_changed")
    assert failed.preparation.status == "failed"
