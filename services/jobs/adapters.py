"""The adapter a job's `from` names (`services.core.adapters` reads it), checked against
the job and frozen into it: the job's LoRA is the adapter's base, rank, alpha and
targets."""

from __future__ import annotations

from services.core import errors
from services.core.adapters import Adapter
from trainyard.job.v1 import job_pb2


def check(job: job_pb2.Job, adapter: Adapter) -> None:
    """INCOMPATIBLE_ADAPTERS when the job's base or its stated LoRA shape is not the
    adapter's: the weights would not load, or would not be the job's."""
    ad = job.adaptation
    mismatched = (
        "base_model"
        if adapter.base != job.base_model
        else "adaptation.rank"
        if ad.HasField("rank") and ad.rank != adapter.rank
        else "adaptation.alpha"
        if ad.HasField("alpha") and ad.alpha != adapter.alpha
        else "adaptation.targets"
        if ad.targets and tuple(sorted(ad.targets)) != adapter.targets
        else ""
    )
    if mismatched:
        raise errors.DomainError(
            f"Field {mismatched} does not match the adapter the job starts from.",
            reason="INCOMPATIBLE_ADAPTERS",
            metadata={"field": mismatched},
            fields=[(mismatched, "does not match the adapter named by from")],
        )


def apply(job: job_pb2.Job, adapter: Adapter) -> None:
    """Fill the job's LoRA shape from the adapter: it is what the weights are."""
    ad = job.adaptation
    ad.rank, ad.alpha = adapter.rank, adapter.alpha
    ad.targets[:] = list(adapter.targets)
