"""Where JobService's rows come from and go: the built-in fixture, an org's upload read
through ArtifactService, or an `s3://` or `hf://` source (`remote`), and the snapshot kept
as an object the job holds. The rows themselves are `trainyard.training.datasets`."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Protocol, TypeVar

from services.core import datasets, errors
from services.jobs import remote
from trainyard.job.v1 import job_pb2
from trainyard.training import decisions
from trainyard.training.catalog import FIXTURE_DATASET
from trainyard.training.datasets import DatasetError, Row, fixture_rows, parse_jsonl

T = TypeVar("T")


class DatasetReader(Protocol):
    """Where an org's uploaded bytes come from (ArtifactService, in the deployment)."""

    def read(self, org: str, sha256: str) -> bytes: ...

    def open(self, org: str, sha256: str) -> IO[bytes]:
        """The object as a file read as it streams; its sha256 is checked at its end."""
        ...


class SnapshotKeeper(Protocol):
    """Where a job's snapshot is kept as an object the job holds, so a retry reads the
    same rows after the source is gone (ArtifactService, in the deployment)."""

    def keep(self, org: str, job_id: str, sha256: str, data: bytes) -> None: ...


def load(
    dataset: job_pb2.Dataset,
    org: str,
    reader: DatasetReader | None,
    kind: str = "chat",
    sources: remote.SourceCredentials | None = None,
) -> list[Row]:
    """The rows `dataset` names, of the `kind` the base reads (`catalog.Base.rows`): chats,
    or decisions carried as chats (`decisions.to_row`). A remote dataset gets, or is read
    pinned to, its record of what was read (`remote.fetch`)."""
    uri = dataset.uri
    if kind == "decision":
        if uri == decisions.FIXTURE_DATASET:
            return [decisions.to_row(d) for d in decisions.fixture_rows()]
        read = _bytes(dataset, org, reader, sources)
        return [decisions.to_row(d) for d in _parsed(read, decisions.parse_jsonl)]
    if uri == FIXTURE_DATASET:
        return fixture_rows()
    return _parsed(_bytes(dataset, org, reader, sources), parse_jsonl)


def at_hand(dataset: job_pb2.Dataset, kind: str = "chat") -> bool:
    """Whether `load` makes the rows without reading anything: a fixture built in code."""
    return dataset.uri == (decisions.FIXTURE_DATASET if kind == "decision" else FIXTURE_DATASET)


def _bytes(
    dataset: job_pb2.Dataset,
    org: str,
    reader: DatasetReader | None,
    sources: remote.SourceCredentials | None,
) -> Callable[[], bytes]:
    if remote.is_remote(dataset.uri):
        if sources is None:
            raise errors.Unavailable()
        return lambda: remote.fetch(dataset, org, sources)
    if reader is None:
        raise errors.Unavailable()
    return lambda: reader.read(org, dataset.uri.split(":", 1)[1])


def _parsed(read: Callable[[], bytes], parse: Callable[[bytes], list[T]]) -> list[T]:
    data = read()
    try:
        return parse(data)
    except DatasetError as exc:
        raise domain_error(exc) from None


def held_out(kind: str) -> Callable[[Row], bool] | None:
    """Which rows a snapshot holds out: decisions by their state, a fifth; chats by the
    product API's split (None)."""
    return decisions.held_out_row if kind == "decision" else None


def domain_error(exc: DatasetError) -> errors.DomainError:
    """A dataset refusal as the contract answers it (as an upload's check answers it)."""
    return datasets.refusal(exc)
