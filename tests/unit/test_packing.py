"""Unpacking takes only what `pack` writes. An archive can come from another org's
machine (a job's output, the adapter a job starts from), so anything else is refused
whole, before a single file is written, whatever the interpreter's tarfile filter would
have let through."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from trainyard import packing


def archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return out.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info


def file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return entry(name), data


def symlink_chain_past_path_max() -> bytes:
    """The shape of CVE-2025-4517's archive: nested directories whose symlinks resolve
    past PATH_MAX, so the data filter's realpath check sees a path inside while the
    kernel follows one outside."""
    long_part, steps, path = "d" * 247, "abcdefghijklmnop", ""
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    for step in steps:
        members.append((entry(f"{path}{long_part}", tarfile.DIRTYPE), b""))
        members.append((entry(f"{path}{step}", tarfile.SYMTYPE, long_part), b""))
        path += long_part + "/"
    deep = "/".join(steps) + "/" + "l" * 254
    members.append((entry(deep, tarfile.SYMTYPE, "../" * len(steps)), b""))
    members.append((entry("escape", tarfile.SYMTYPE, deep + "/.." * 8 + "/outside"), b""))
    members.append(file("escape/pwned.py", b"raise SystemExit('owned')\n"))
    return archive(*members)


def gzipped() -> bytes:
    return gzip.compress(archive(file("model.safetensors")))


UNSAFE: dict[str, Callable[[], bytes]] = {
    "symlink chain past PATH_MAX": symlink_chain_past_path_max,
    "symlink out": lambda: archive(
        (entry("out", tarfile.SYMTYPE, "/tmp"), b""), file("out/pwned.py")
    ),
    "hard link": lambda: archive(file("a"), (entry("b", tarfile.LNKTYPE, "/etc/passwd"), b"")),
    "absolute name": lambda: archive(file("/tmp/pwned.py")),
    "parent name": lambda: archive(file("../pwned.py")),
    "parent inside a name": lambda: archive(file("a/../../pwned.py")),
    "empty part": lambda: archive(file("a//b")),
    "backslash": lambda: archive(file("..\\pwned.py")),
    "device": lambda: archive((entry("dev", tarfile.CHRTYPE), b"")),
    "fifo": lambda: archive((entry("fifo", tarfile.FIFOTYPE), b"")),
    "directory entry": lambda: archive((entry("d", tarfile.DIRTYPE), b""), file("d/a")),
    "a name twice": lambda: archive(file("a", b"1"), file("a", b"2")),
    "a file that is also a folder": lambda: archive(file("a"), file("a/b")),
    "a folder that is also a file": lambda: archive(file("a/b"), file("a")),
    "compressed": gzipped,
    "not a tar": lambda: b"\x00" * 10 + b"not an archive" * 100,
}


@pytest.mark.parametrize("make", UNSAFE.values(), ids=UNSAFE.keys())
def test_an_archive_pack_never_writes_is_refused_with_nothing_written(
    make: Callable[[], bytes], tmp_path: Path
) -> None:
    target = tmp_path / "work" / "adapter"
    with pytest.raises(packing.UnsafeArchive):
        packing.unpack(io.BytesIO(make()), target)
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert not (tmp_path / "outside").exists()


def test_caps_on_members_and_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    many = archive(*(file(f"f{n}") for n in range(5)))
    monkeypatch.setattr(packing, "MAX_MEMBERS", 4)
    with pytest.raises(packing.UnsafeArchive, match="too many files"):
        packing.unpack(io.BytesIO(many), tmp_path / "a")
    monkeypatch.setattr(packing, "MAX_MEMBERS", 10)
    monkeypatch.setattr(packing, "MAX_UNPACKED_BYTES", 4)
    with pytest.raises(packing.UnsafeArchive, match="too many bytes"):
        packing.unpack(io.BytesIO(many), tmp_path / "b")
    assert not any((tmp_path / "a").iterdir()) and not any((tmp_path / "b").iterdir())


def test_what_pack_writes_unpacks_as_it_was(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "nested").mkdir(parents=True)
    (source / "model.safetensors").write_bytes(b"\x01" * 100)
    (source / "nested" / "config.json").write_text("{}")
    names = packing.unpack(io.BytesIO(packing.pack_bytes(source)), tmp_path / "out")
    assert names == ["model.safetensors", "nested/config.json"]
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == b"\x01" * 100
    assert (tmp_path / "out" / "nested" / "config.json").read_text() == "{}"


def test_it_unpacks_only_into_an_empty_directory(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "a").write_text("new")
    target = tmp_path / "target"
    target.mkdir()
    (target / "a").write_text("kept")
    with pytest.raises(packing.UnsafeArchive):
        packing.unpack(io.BytesIO(packing.pack_bytes(source)), target)
    assert (target / "a").read_text() == "kept"
