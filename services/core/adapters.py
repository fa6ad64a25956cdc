"""A stored LoRA adapter that a job's or a training client's `from` names: one of the
org's `lora` objects, read back at create so what starts from it is shaped as it is.

The object's row says what it is (kind, status, retention) and whose base it trained: a
training client's adapter carries `base` in its meta, a job's `lora` output is the base of
the job that made it. The rank, alpha and targets are in no row, only in the adapter's own
`adapter_config.json` (peft's), so the bytes are read too, as they stream past and to
their end, where their sha256 is checked; a saved state holds the optimizer's moments
beside it (a client's `save_weights` of kind `state`)."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from typing import IO, Any, Protocol

from services.core import errors
from services.core.object_tables import ObjectRow, readable
from services.core.store import Store, utcnow
from services.core.tables import JobRow
from trainyard import packing
from trainyard.training.client_calls import OPTIMIZER_FILE

# An adapter's config is a few hundred bytes; anything near this is not peft's.
_MAX_CONFIG_BYTES = 1 << 20


class Opener(Protocol):
    def open(self, org: str, sha256: str) -> IO[bytes]:
        """The object as a file read as it streams; its sha256 is checked at its end."""
        ...


@dataclasses.dataclass(frozen=True)
class Adapter:
    """What starts from the adapter must agree with, and whether it can restore Adam's
    state too."""

    base: str
    rank: int
    alpha: int
    targets: tuple[str, ...]
    optimizer: bool = False


def _absent() -> errors.DomainError:
    return errors.ValidationError("from", "names no stored LoRA adapter of the org")


def _not_adapter() -> errors.DomainError:
    return errors.ValidationError("from", "names an object that is not a LoRA adapter")


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


def _scan(stream: IO[bytes]) -> tuple[dict[str, Any] | None, bool]:
    """The adapter's config and whether the optimizer's state is beside it, read as the
    archive streams past; no config when any member is not one an executor's `pack`
    writes (the executor that loads it unpacks it, and it may be the platform's)."""
    config, optimizer = None, False
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in packing.members(tar):
                if member.name == OPTIMIZER_FILE:
                    optimizer = True
                if member.name == "adapter_config.json" and member.size <= _MAX_CONFIG_BYTES:
                    fh = tar.extractfile(member)
                    config = json.loads(fh.read()) if fh is not None else None
    except (tarfile.TarError, ValueError):  # UnsafeArchive and bad JSON are ValueErrors
        return None, False
    return (config if isinstance(config, dict) else None), optimizer


def read(store: Store | None, opener: Opener | None, org: str, sha256: str) -> Adapter:
    """The adapter `sha256` names in `org`. A sha256 the org holds no stored `lora` under
    is INVALID_REQUEST on `from`, never echoing it."""
    if store is None or opener is None:
        raise errors.Unavailable()
    base = _base_of(store, org, sha256)
    if base is None:
        raise _absent()
    try:
        with opener.open(org, sha256) as stream:
            config, optimizer = _scan(stream)
            while stream.read(1 << 20):  # to its end, where its sha256 is checked
                pass
    except errors.ValidationError:  # gone since its row was read, or too large
        raise _absent() from None
    if config is None:
        raise _not_adapter()
    try:
        targets = config.get("target_modules") or ()
        return Adapter(
            base=base,
            rank=int(config["r"]),
            alpha=int(config["lora_alpha"]),
            targets=tuple(sorted(str(t) for t in targets)),
            optimizer=optimizer,
        )
    except (KeyError, TypeError, ValueError):
        raise _not_adapter() from None
