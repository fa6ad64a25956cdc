"""Where JobService's rows come from and go: the built-in fixture or an org's upload read
through ArtifactService, and the snapshot kept as an object the job holds. The rows
themselves are `trainyard.training.datasets`."""

from __future__ import annotations

from typing import Protocol

from services.core import errors
from trainyard.training.catalog import FIXTURE_DATASET
from trainyard.training.datasets import DatasetError, Row, fixture_rows, parse_jsonl


class DatasetReader(Protocol):
    """Where an org's uploaded bytes come from (ArtifactService, in the deployment)."""

    def read(self, org: str, sha256: str) -> bytes: ...


class SnapshotKeeper(Protocol):
    """Where a job's snapshot is kept as an object the job holds, so a retry reads the
    same rows after the source is gone (ArtifactService, in the deployment)."""

    def keep(self, org: str, job_id: str, sha256: str, data: bytes) -> None: ...


def load(uri: str, org: str, reader: DatasetReader | None) -> list[Row]:
    if uri == FIXTURE_DATASET:
        return fixture_rows()
    if reader is None:
        raise errors.Unavailable()
    try:
        return parse_jsonl(reader.read(org, uri.split(":", 1)[1]))
    except DatasetError as exc:
        raise domain_error(exc) from None


def domain_error(exc: DatasetError) -> errors.DomainError:
    """A dataset refusal as the contract answers it."""
    if exc.reason == "DATASET_SELECTION_INVALID":
        return errors.ValidationError(exc.field, str(exc), reason=exc.reason)
    return errors.FailedPrecondition(
        str(exc), reason=exc.reason, metadata={"field": exc.field, **exc.metadata}
    )
