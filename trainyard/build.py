"""Which code a process runs: the package's version and a build id, the digest of the
source files of every Trainyard package it can import. Two processes with the same build
run the same code, so `trainyard status` shows which parts a rolling restart has yet to
reach; the version alone would not change for a checkout's edits."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
from pathlib import Path

PACKAGES = ("trainyard", "services", "executor", "infra", "gateway")
SUFFIXES = frozenset({".py", ".lua", ".tmpl", ".js", ".css", ".html"})


def version() -> str:
    try:
        return importlib.metadata.version("trainyard")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def build_id() -> str:
    """12 hex digits of the sha256 over each source file's package-relative name and bytes,
    in name order."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec else []:
            base = Path(root)
            for path in sorted(base.rglob("*")):
                if path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                    digest.update(f"{package}/{path.relative_to(base).as_posix()}\0".encode())
                    digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
