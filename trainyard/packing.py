"""One deterministic tar packing, shared by the executor and the CLI: files in name order,
zero times and owners, mode 0644 — so the same files are always the same bytes, and so
the same artifact."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
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


class UnsafeArchive(ValueError):
    """An archive that `pack` did not write: it is refused whole, before any file is made."""


# What one artifact may unpack to; `pack` of any output this project writes stays far below.
MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 64 * 1024**3
MAX_NAME = 1024


def members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Each member as it is read, if it is one `pack` could have written: a regular file
    under a relative name of plain parts, once. Anything else (a link, a device, a
    directory entry, an absolute or `..` name) is UnsafeArchive. Read in stream mode
    (`r|`), the archive is checked whole without being held."""
    files: set[str] = set()
    folders: set[str] = set()
    total = 0
    for count, info in enumerate(tar):
        if count == MAX_MEMBERS:
            raise UnsafeArchive("the archive holds too many files")
        if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            raise UnsafeArchive("the archive holds something other than regular files")
        name = info.name
        parts = name.split("/")
        if (
            not name
            or len(name) > MAX_NAME
            or "\\" in name
            or "\0" in name
            or any(part in ("", ".", "..") for part in parts)
        ):
            raise UnsafeArchive("the archive names a file outside its directory")
        # A name is one file: never twice, never also the folder of another ("a", "a/b").
        above = {"/".join(parts[:n]) for n in range(1, len(parts))}
        if name in files or name in folders or not above.isdisjoint(files):
            raise UnsafeArchive("the archive names a file twice")
        files.add(name)
        folders |= above
        total += info.size
        if total > MAX_UNPACKED_BYTES:
            raise UnsafeArchive("the archive unpacks to too many bytes")
        yield info


def unpack(source: IO[bytes], directory: Path) -> list[str]:
    """Extract an archive `pack` wrote into `directory`, new or empty; returns the files'
    names. Anything else is UnsafeArchive, with nothing written: only plain tar (no
    compression to inflate), only regular files, only names inside `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise UnsafeArchive("unpacks only into an empty directory")
    try:
        with tarfile.open(fileobj=source, mode="r:") as tar:
            # All are checked before any is written, so no extraction filter is relied on
            # alone (tarfile's were bypassable before 3.11.13); the data filter stays as a
            # second layer, re-checking each name and mode.
            checked = list(members(tar))
            tar.extractall(directory, members=checked, filter="data")
    except tarfile.TarError:
        raise UnsafeArchive("the bytes are not a tar archive") from None
    return [info.name for info in checked]
