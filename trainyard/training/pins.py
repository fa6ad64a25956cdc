"""A local base's revision: the sha256 of its files, so a job pins the bytes it was
created against and an executor holding other bytes under that name can say so.

Each file's digest is kept by path, size and modification time, so a base of many
gigabytes is read once per process, not at every listing of the models directory.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

# What each file's sha256 was, by (path, size, mtime_ns).
_DIGESTS: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()
CHUNK = 8 * 1024 * 1024


def file_sha256(path: Path) -> str:
    """A file's sha256, read again only when its size or modification time changed."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _LOCK:
        known = _DIGESTS.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    with _LOCK:
        _DIGESTS[key] = digest.hexdigest()
    return digest.hexdigest()


def revision(directory: Path) -> str:
    """The sha256 of a model directory's files: each file's name and sha256, by name.
    Hidden files (an editor's, a copy's partial) are left out."""
    manifest = hashlib.sha256()
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_file() and not entry.name.startswith("."):
            manifest.update(f"{entry.name}\0{file_sha256(Path(entry.path))}\n".encode())
    return manifest.hexdigest()
