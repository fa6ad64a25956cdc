"""One deterministic tar packing, shared by the executor and the CLI: files in name order,
zero times and owners, mode 0644 — so the same files are always the same bytes, and so
the same artifact."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import IO


def _files(directory: Path) -> list[tuple[str, Path]]:
    found = [(p.relative_to(directory).as_posix(), p) for p in directory.rglob("*") if p.is_file()]
    return sorted(found)


def pack(directory: Path, out: IO[bytes]) -> None:
    """Write `directory`'s regular files to `out` as a deterministic tar."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in _files(directory):
            info = tarfile.TarInfo(name)
            info.size = path.stat().st_size
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with path.open("rb") as fh:
                tar.addfile(info, fh)


def pack_to_file(directory: Path, target: Path) -> tuple[str, int]:
    """Pack into `target`; returns its sha256 and size."""
    with target.open("wb") as fh:
        pack(directory, fh)
    digest = hashlib.sha256()
    with target.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest(), target.stat().st_size


def pack_bytes(directory: Path) -> bytes:
    buffer = io.BytesIO()
    pack(directory, buffer)
    return buffer.getvalue()


def unpack(source: IO[bytes], directory: Path) -> list[str]:
    """Extract a packed artifact safely (no links, no paths outside `directory`)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=source, mode="r") as tar:
        names = tar.getnames()
        tar.extractall(directory, filter="data")
    return names
