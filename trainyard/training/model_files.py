"""A deployment's models directory as read from disk: where it is, what it holds (a
listing compared to notice a model copied in or taken away), and a safetensors file's
tensors, read without loading a weight. The catalog (`catalog.local_base`) decides what
of it is a base."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# How long a listing of the models directory is trusted before it is read again.
RESCAN_SECONDS = 5.0

# What the models directory held when last read: each folder with its files' sizes and
# modification times, so a model copied in (or still being copied) reads as a change.
Listing = tuple[tuple[str, tuple[tuple[str, int, int], ...]], ...]


def models_dir(env: Mapping[str, str]) -> Path:
    """Where local Hugging Face bases are found: `TRAINYARD_MODELS_DIR`, else `models/`
    under `TRAINYARD_HOME`."""
    named = (
        env.get("TRAINYARD_MODELS_DIR")
        or Path(env.get("TRAINYARD_HOME") or ".trainyard") / "models"
    )
    return Path(named).resolve()


def listing(models_dir: Path) -> Listing:
    """The models directory's folders and their files, read with `stat` alone."""
    try:
        folders = sorted((e for e in os.scandir(models_dir) if e.is_dir()), key=lambda e: e.name)
    except OSError:
        return ()
    return tuple((folder.name, _files(folder.path)) for folder in folders)


def _files(folder: str) -> tuple[tuple[str, int, int], ...]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
        return tuple(
            (e.name, (st := e.stat()).st_size, st.st_mtime_ns) for e in entries if e.is_file()
        )
    except OSError:
        return ()


def safetensors_header(path: Path) -> dict[str, Any]:
    """A safetensors file's header (tensor names, shapes), read without loading it;
    ValueError when it is no such file (too short, or its header not JSON)."""
    with path.open("rb") as fh:
        try:
            size = struct.unpack("<Q", fh.read(8))[0]
        except struct.error:
            raise ValueError("shorter than a safetensors header") from None
        header: dict[str, Any] = json.loads(fh.read(size))
    header.pop("__metadata__", None)
    return header
