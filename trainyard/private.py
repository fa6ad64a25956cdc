"""What the stack writes is its own user's alone: the database holds every org's dataset
rows, the home holds the keys, and executors' work directories hold datasets and outputs
in the clear while a task runs. Every process of the stack that writes calls `private()`
first, so each file it (or a child) creates is 0600 and each directory 0700; `tighten`
takes group and other access from what an older version, or another umask, left."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

UMASK = 0o077


def private() -> None:
    """From here on, what this process and its children create is the user's only."""
    os.umask(UMASK)


def tighten(paths: Iterable[Path]) -> None:
    """Drop group and other access from each path that exists (links are left alone)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & UMASK:
                path.chmod(stat.S_IMODE(mode) & ~UMASK)


def tighten_home(home: Path, sqlite_database: Path | None = None) -> None:
    """A home made before files were private: the home, what lies directly in it (below, the
    home's own 0700 stands guard), and a SQLite database with its journals wherever it is."""
    paths = [home, *(home.iterdir() if home.is_dir() else ())]
    if sqlite_database is not None:
        paths += [sqlite_database.with_name(sqlite_database.name + s) for s in SQLITE_SUFFIXES]
    tighten(paths)


# The database file and the journals SQLite keeps beside it.
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


# Variables only the services hold: S3's and the database's credentials, the services'
# key, the master key, and credentials of any kind by their usual names.
_SECRET_PREFIXES = ("TRAINYARD_S3_", "TRAINYARD_DATABASE", "AWS_", "PG", "DATABASE_URL")
_SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL")


def is_secret(name: str) -> bool:
    upper = name.upper()
    return upper.startswith(_SECRET_PREFIXES) or any(
        upper.endswith(word) or f"{word}_" in upper for word in _SECRET_WORDS
    )


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less what an executor or a trainer must not hold: a trainer runs code and
    reads data an org chose, so what its environment carries, the org may take."""
    return {name: value for name, value in env.items() if not is_secret(name)}
