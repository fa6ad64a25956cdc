"""Where JobService's rows come from and go: the built-in fixture or an org's upload read
through ArtifactService, and the snapshot kept as an object the job holds. The rows
themselves are `trainyard.training.datasets`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from services.core import datasets, errors
from trainyard.training import decisions
from trainyard.training.catalog import FIXTURE_DATASET
from trainyard.training.datasets import DatasetError, Row, fixture_rows, parse_jsonl

T = TypeVar("T")


class DatasetReader(Protocol):
    """Where an org's uploaded bytes come from (ArtifactService, in the deployment)."""

    def read(self, org: str, sha256: str) -> bytes: ...


class SnapshotKeeper(Protocol):
    """Where a job's snapshot is kept as an object the job holds, so a retry reads the
    same rows after the source is gone (ArtifactService, in the deployment)."""

    def keep(self, org: str, job_id: str, sha256: str, data: bytes) -> None: ...


def load(uri: str, org: str, reader: DatasetReader | None, kind: str = "chat") -> list[Row]:
    """The rows `uri` names, of the `kind` the base reads (`catalog.Base.rows`): chats, or
    decisions carried as chats (`decisions.to_row`)."""
    if kind == "decision":
        if uri == decisions.FIXTURE_DATASET:
            return [decisions.to_row(d) for d in decisions.fixture_rows()]
        return [decisions.to_row(d) for d in _parsed(uri, org, reader, decisions.parse_jsonl)]
    if uri == FIXTURE_DATASET:
        return fixture_rows()
    return _parsed(uri, org, reader, parse_jsonl)


def _parsed(
    uri: str, org: str, reader: DatasetReader | None, parse: Callable[[bytes], list[T]]
) -> list[T]:
    if reader is None:
        raise errors.Unavailable()
    try:
        return parse(reader.read(org, uri.split(":", 1)[1]))
    except DatasetError as exc:
        raise domain_error(exc) from None


def held_out(kind: str) -> Callable[[Row], bool] | None:
    """Which rows a snapshot holds out: decisions by their state, a fifth; chats by the
    product API's split (None)."""
    return decisions.held_out_row if kind == "decision" else None


def domain_error(exc: DatasetError) -> errors.DomainError:
    """A dataset refusal as the contract answers it (as an upload's check answers it)."""
    return datasets.refusal(exc)
