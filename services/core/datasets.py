"""An org's dataset as the contract judges it, shared by JobService (a create reads the rows)
and ArtifactService (an upload is checked before it is kept): the refusal a bad row gets,
and what an upload of kind `dataset` must hold."""

from __future__ import annotations

import json

from services.core import errors
from trainyard.training import decisions
from trainyard.training.datasets import DatasetError, parse_jsonl

# The most a job reads of an uploaded dataset; a larger upload could never be trained on,
# so it is refused rather than read whole to be checked.
MAX_DATASET_BYTES = 512 * 1024 * 1024


def refusal(exc: DatasetError) -> errors.DomainError:
    """A dataset refusal as the contract answers it."""
    if exc.reason == "TRAINING_DATASET_SELECTION_INVALID":
        return errors.ValidationError(exc.field, str(exc), reason=exc.reason)
    return errors.FailedPrecondition(
        str(exc), reason=exc.reason, metadata={"field": exc.field, **exc.metadata}
    )


def check_upload(data: bytes) -> None:
    """Raise the refusal a create would give rows that are no dataset. Chats and decision
    rows share the kind `dataset` (a decision base's job names its upload the same way),
    so bytes valid as either are kept; the two cannot mix, as a chat row needs `messages`
    and a decision row refuses any field but its own. When neither parses, the error is the
    one of the format the first row has, so it names what is wrong with that format."""
    try:
        rows = parse_jsonl(data)
    except DatasetError as as_chats:
        try:
            decisions.parse_jsonl(data)
        except DatasetError as as_decisions:
            raise refusal(as_decisions if _first_is_decision(data) else as_chats) from None
        return
    if not rows:
        raise empty()


def empty(field: str = "dataset") -> errors.DomainError:
    """The refusal of a dataset that holds no rows: an empty upload (its `size`) or one of
    blank lines alone."""
    return refusal(
        DatasetError(
            "The dataset holds no rows: each of its lines is to be one chat.",
            reason="TRAINING_DATASET_EMPTY",
            field=field,
        )
    )


def _first_is_decision(data: bytes) -> bool:
    first = next((line for line in data.splitlines() if line.strip()), b"")
    try:
        doc = json.loads(first)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and "messages" not in doc and "state" in doc
