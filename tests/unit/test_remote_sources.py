"""`hf://` datasets read through huggingface_hub's own cache, offline: the uri's parts, the
record a create makes (commit, sha256), the pinned read after the ref moves, and what a
read that cannot be made answers (a category, nothing named)."""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

import pytest
from huggingface_hub import constants

from services.core import errors
from services.jobs import remote
from trainyard.job.v1 import job_pb2

REPO = "acme/support"


def commit_to_cache(cache: Path, ref: str, data: bytes) -> str:
    """A commit in the Hub client's cache layout, `ref` pointing at it."""
    commit = secrets.token_hex(20)
    root = cache / f"datasets--{REPO.replace('/', '--')}"
    (root / "snapshots" / commit / "train").mkdir(parents=True)
    (root / "snapshots" / commit / "train" / "rows.jsonl").write_bytes(data)
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / ref).write_text(commit)
    return commit


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("uri", "parts"),
    [
        (f"hf://datasets/{REPO}/rows.jsonl", (REPO, None, "rows.jsonl")),
        (f"hf://datasets/{REPO}@v2/train/rows.jsonl", (REPO, "v2", "train/rows.jsonl")),
    ],
)
def test_an_hf_uri_names_a_dataset_a_revision_and_a_file(uri: str, parts: tuple) -> None:  # type: ignore[type-arg]
    assert remote.hf_parts(uri) == parts


@pytest.mark.parametrize(
    "uri",
    [
        f"hf://datasets/{REPO}",  # no file
        f"hf://{REPO}/rows.jsonl",  # a model repository
        f"hf://datasets/{REPO}/../rows.jsonl",
        "hf://datasets/not a repo/rows.jsonl",
    ],
)
def test_an_hf_uri_that_names_no_dataset_file_is_refused_without_echo(uri: str) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        remote.hf_parts(uri)
    assert caught.value.metadata == {"field": "dataset.uri"}
    assert "acme" not in caught.value.message and "rows" not in caught.value.message


def test_a_create_records_the_commit_and_a_later_read_is_pinned_to_it(cache: Path) -> None:
    first = b'{"messages": []}\n'
    commit = commit_to_cache(cache, "main", first)
    dataset = job_pb2.Dataset(uri=f"hf://datasets/{REPO}@main/train/rows.jsonl")
    assert remote.fetch(dataset, "acme", sources=None) == first  # type: ignore[arg-type]
    assert dataset.resolved_revision == commit
    assert dataset.source_sha256 == hashlib.sha256(first).hexdigest()

    commit_to_cache(cache, "main", b'{"messages": [1]}\n')  # main moves on
    pinned = job_pb2.Dataset()
    pinned.CopyFrom(dataset)
    assert remote.fetch(pinned, "acme", sources=None) == first  # type: ignore[arg-type]
    assert pinned == dataset


def test_bytes_other_than_those_recorded_are_refused_as_changed(cache: Path) -> None:
    commit = commit_to_cache(cache, "main", b"rows\n")
    dataset = job_pb2.Dataset(
        uri=f"hf://datasets/{REPO}/train/rows.jsonl",
        resolved_revision=commit,
        source_sha256=hashlib.sha256(b"other rows\n").hexdigest(),
    )
    with pytest.raises(remote.Unreadable) as caught:
        remote.fetch(dataset, "acme", sources=None)  # type: ignore[arg-type]
    assert caught.value.category == "changed"


def test_offline_what_the_cache_lacks_is_unreachable(cache: Path) -> None:
    commit_to_cache(cache, "main", b"rows\n")
    for uri in (
        f"hf://datasets/{REPO}@v9/train/rows.jsonl",
        f"hf://datasets/{REPO}/train/other.jsonl",
        "hf://datasets/acme/elsewhere/rows.jsonl",
    ):
        with pytest.raises(remote.Unreadable) as caught:
            remote.fetch(job_pb2.Dataset(uri=uri), "acme", sources=None)  # type: ignore[arg-type]
        assert caught.value.category == "unreachable"
        assert caught.value.metadata == {"field": "dataset.uri", "category": "unreachable"}
