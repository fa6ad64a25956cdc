"""The adapter a job's `from` names: a stored `lora` object of the org, read back at create
so the job's LoRA is the adapter's (its base, rank, alpha and targets) and frozen as such.

The object's row says what it is (kind, status, retention) and whose base it trained: a
training client's adapter carries `base` in its meta, a job's `lora` output is the base of
the job that made it. The rank, alpha and targets are in no row, only in the adapter's own
`adapter_config.json` (peft's), so the bytes are read too, the way an uploaded dataset is
read at create: one source of truth for every adapter, whoever stored it."""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile

from services.core import errors
from services.core.store import Store, utcnow
from services.core.tables import JobRow, ObjectRow, readable
from services.jobs import sources
from trainyard.job.v1 import job_pb2

# An adapter's config is a few hundred bytes; anything near this is not peft's.
_MAX_CONFIG_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Adapter:
    """What a job started from the adapter must agree with."""

    base: str
    rank: int
    alpha: int
    targets: tuple[str, ...]


def _absent() -> errors.DomainError:
    return errors.ValidationError("from", "names no stored LoRA adapter of the org")


def _base_of(store: Store, org: str, sha256: str) -> str | None:
    """The base the object's row names; None when it is no stored, readable `lora`."""
    with store.unit(write=False) as session:
        row = session.get(ObjectRow, (org, sha256))
        if row is None or row.kind != "lora" or not readable(session, row, utcnow()):
            return None
        base = str((row.meta or {}).get("base") or "")
        if not base and row.job_id:
            maker = session.get(JobRow, row.job_id)
            base = maker.frozen().base_model if maker is not None else ""
        return base


def _config(data: bytes) -> dict[str, object]:
    """The adapter's `adapter_config.json`; VALIDATION_ERROR on `from` when it has none."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            member = tar.getmember("adapter_config.json")
            fh = tar.extractfile(member) if member.size <= _MAX_CONFIG_BYTES else None
            if fh is None:
                raise KeyError()
            config = json.loads(fh.read())
    except (tarfile.TarError, KeyError, ValueError):
        raise errors.ValidationError("from", "names an object that is not a LoRA adapter") from None
    if not isinstance(config, dict):
        raise errors.ValidationError("from", "names an object that is not a LoRA adapter")
    return config


def read(
    store: Store | None, reader: sources.DatasetReader | None, org: str, sha256: str
) -> Adapter:
    """The adapter `sha256` names in `org`. A sha256 the org holds no stored `lora` under
    is VALIDATION_ERROR on `from`, never echoing it."""
    if store is None or reader is None:
        raise errors.Unavailable()
    base = _base_of(store, org, sha256)
    if base is None:
        raise _absent()
    try:
        data = reader.read(org, sha256)
    except errors.ValidationError:  # gone since its row was read, or too large
        raise _absent() from None
    config = _config(data)
    try:
        targets = config.get("target_modules") or ()
        return Adapter(
            base=base,
            rank=int(config["r"]),  # type: ignore[call-overload]
            alpha=int(config["lora_alpha"]),  # type: ignore[call-overload]
            targets=tuple(sorted(str(t) for t in targets)),  # type: ignore[attr-defined]
        )
    except (KeyError, TypeError, ValueError):
        raise errors.ValidationError("from", "names an object that is not a LoRA adapter") from None


def check(job: job_pb2.Job, adapter: Adapter) -> None:
    """INCOMPATIBLE_ADAPTERS when the job's base or its stated LoRA shape is not the
    adapter's: the weights would not load, or would not be the job's."""
    ad = job.adaptation
    mismatched = (
        "base_model" if adapter.base != job.base_model
        else "adaptation.rank" if ad.HasField("rank") and ad.rank != adapter.rank
        else "adaptation.alpha" if ad.HasField("alpha") and ad.alpha != adapter.alpha
        else "adaptation.targets" if ad.targets and tuple(sorted(ad.targets)) != adapter.targets
        else ""
    )  # fmt: skip
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
