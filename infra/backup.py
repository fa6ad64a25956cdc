"""`trainyard backup` and `trainyard restore`: one archive of a deployment's database and
every stored object, taken while the stack runs, restored into a new home.

The archive is a plain tar:

    database/<table>.jsonl    every row, read in one snapshot (services/core/dump.py)
    objects/<org>/<sha256>    each object stored at that snapshot, sealed under its own key
    home/tinker/names.json    the Tinker wire's names of models and checkpoints
    manifest.json             revision, versions, counts, and each member's sha256 and size
    manifest.hmac             HMAC-SHA256 of the manifest under a key derived from the
                              master key

A restore reads the whole archive and checks every member against the manifest and the
manifest against its HMAC before it writes anything, so a corrupt, cut short or altered
archive is refused and changes nothing. The master key is not in the archive: a restore
needs the deployment's own, and says so when it is given another.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import hmac
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from infra.objectstore import SeaweedFS, credentials
from infra.procs import Output
from services.artifacts.server import object_copier
from services.core import dump, keys
from services.core.config import Config
from services.core.store import create_engine
from trainyard import build

FORMAT = "trainyard-backup/1"
MANIFEST, SEAL = "manifest.json", "manifest.hmac"
# What of the home, besides the store and its objects, a deployment needs back.
HOME_FILES = ("tinker/names.json",)
_OBJECT = re.compile(r"^objects/([a-z0-9-]{1,63})/([0-9a-f]{64})$")


class BackupError(Exception):
    """Why a backup or restore cannot go on, in words an operator acts on."""


@dataclasses.dataclass(frozen=True)
class Summary:
    path: Path
    revision: str
    rows: int
    objects: int
    bytes: int


def key_id(master: bytes) -> str:
    """Names the master key without disclosing it, so a restore tells another key from a
    corrupt archive."""
    return keys.derive(master, "backup-key-id").hex()[:16]


def _seal(master: bytes, manifest: bytes) -> str:
    return hmac.new(keys.derive(master, "backup-manifest"), manifest, hashlib.sha256).hexdigest()


class _Hashing:
    """A file written through, counting and hashing what passes."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out, self.digest, self.size = out, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self._out.write(data)


# -- backup ---------------------------------------------------------------------------------


def with_object_store(config: Config, stack_info: dict[str, Any] | None) -> Config:
    """The config with the object store to read: the one configured, else the running
    stack's SeaweedFS with the home's credentials."""
    if config.s3_endpoint:
        return config
    if not stack_info:
        raise BackupError(
            "no stack runs under this home and no TRAINYARD_S3_ENDPOINT is set: start the "
            "stack (`make up`) so its object store can be read"
        )
    access, secret, _ = credentials(config.home)
    return dataclasses.replace(
        config,
        s3_endpoint=str(stack_info["s3_endpoint"]),
        s3_access_key=config.s3_access_key or access,
        s3_secret_key=config.s3_secret_key or secret,
    )


def backup(config: Config, out: Path, echo: Callable[[str], None] = print) -> Summary:
    """Write the archive to `out` (first as `out.partial`, renamed once whole)."""
    master = config.master_key()
    copier = object_copier(config)
    engine = create_engine(config.database_url)
    out = out.resolve()
    partial = out.with_name(out.name + ".partial")
    files: dict[str, dict[str, Any]] = {}
    try:
        with (
            tempfile.TemporaryDirectory(dir=out.parent, prefix=".backup-") as scratch,
            tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar,
        ):

            def member(name: str, write: Callable[[IO[bytes]], Any]) -> Any:
                """Add a member written by `write` (through a file, for its size), noting
                its sha256 and size for the manifest; returns what `write` returned."""
                path = Path(scratch) / "member"
                with open(path, "wb") as fh:
                    hashing = _Hashing(fh)
                    result = write(hashing)  # type: ignore[arg-type]
                files[name] = {"sha256": hashing.digest.hexdigest(), "size": hashing.size}
                tar.add(path, arcname=name)
                path.unlink()
                return result

            with dump.snapshot(engine) as conn:
                revision = dump.revision(conn)
                counts: dict[str, int] = {}
                for table in dump.tables(conn):
                    counts[table.name] = 0

                    def rows(fh: IO[bytes], table: sa.Table = table) -> None:
                        for row in dump.rows(conn, table):
                            fh.write(json.dumps(row, separators=(",", ":")).encode() + b"\n")
                            counts[table.name] += 1

                    member(f"database/{table.name}.jsonl", rows)
                echo(f"database: {sum(counts.values())} rows of {len(counts)} tables at {revision}")
                stored = _stored_objects(conn)
                session = Session(bind=conn)
                total = 0
                for org, sha256 in stored:
                    key = copier.key(session, org, sha256)
                    try:
                        sealed = functools.partial(copier.seal_out, org, sha256, key)
                        total += member(f"objects/{org}/{sha256}", sealed)
                    except Exception as exc:
                        raise BackupError(
                            "an object of the snapshot could not be read from the object "
                            "store (deleted meanwhile, or the store is down); run the backup "
                            "again"
                        ) from exc
                echo(f"objects: {len(stored)}, {total} bytes, each checked against its sha256")
            for name in HOME_FILES:
                source = config.home / name
                if source.is_file():
                    member(f"home/{name}", functools.partial(_copy, source))
            manifest = json.dumps(
                {
                    "format": FORMAT,
                    "create_time": dt.datetime.now(dt.UTC).isoformat(),
                    "version": build.version(),
                    "build": build.build_id(),
                    "revision": revision,
                    "database": engine.dialect.name,
                    "key_id": key_id(master),
                    "tables": counts,
                    # Parents before children: the order a restore inserts them in.
                    "order": list(counts),
                    "objects": len(stored),
                    "object_bytes": total,
                    "files": files,
                },
                indent=1,
                sort_keys=True,
            ).encode()
            member(MANIFEST, lambda fh: fh.write(manifest))
            member(SEAL, lambda fh: fh.write(_seal(master, manifest).encode()))
        os.chmod(partial, 0o600)
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        engine.dispose()
    return Summary(out, revision, sum(counts.values()), len(stored), total)


def _copy(source: Path, out: IO[bytes]) -> None:
    out.write(source.read_bytes())


def _stored_objects(conn: sa.Connection) -> list[tuple[str, str]]:
    objects = sa.table("objects", sa.column("org"), sa.column("sha256"), sa.column("status"))
    query = (
        sa.select(objects.c.org, objects.c.sha256)
        .where(objects.c.status == "stored")
        .order_by(objects.c.org, objects.c.sha256)
    )
    return [(str(org), str(sha)) for org, sha in conn.execute(query)]


# -- restore --------------------------------------------------------------------------------


def verify(archive: Path, master: bytes) -> dict[str, Any]:
    """The archive's manifest, once every member hashed to it and it to its HMAC; a
    BackupError saying what is wrong otherwise. Reads only."""
    seen: dict[str, dict[str, Any]] = {}
    manifest: bytes | None = None
    seal: bytes | None = None
    try:
        with tarfile.open(archive, "r:") as tar:
            for info in tar:
                if not info.isfile():
                    raise BackupError("the archive holds something other than files")
                source = tar.extractfile(info)
                assert source is not None
                digest, size = hashlib.sha256(), 0
                keep = info.name in (MANIFEST, SEAL)
                kept = b""
                for chunk in iter(lambda: source.read(1 << 20), b""):  # noqa: B023
                    digest.update(chunk)
                    size += len(chunk)
                    if keep:
                        kept += chunk
                seen[info.name] = {"sha256": digest.hexdigest(), "size": size}
                if info.name == MANIFEST:
                    manifest = kept
                elif info.name == SEAL:
                    seal = kept
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BackupError("the archive cannot be read whole: it is cut short or corrupt") from exc
    if manifest is None or seal is None:
        raise BackupError("the archive has no manifest at its end: it is cut short")
    try:
        told = json.loads(manifest)
    except ValueError:
        raise BackupError("the archive's manifest is corrupt") from None
    if told.get("format") != FORMAT:
        raise BackupError("this is not a Trainyard backup this version reads")
    if told.get("key_id") != key_id(master):
        raise BackupError(
            "the archive was made under another master key: give the deployment's own "
            "(--master-key-file, or TRAINYARD_MASTER_KEY)"
        )
    if not hmac.compare_digest(seal.decode(errors="replace"), _seal(master, manifest)):
        raise BackupError("the archive's manifest was altered or is corrupt")
    files = dict(told["files"])
    for name in (MANIFEST, SEAL):
        seen.pop(name)
        files.pop(name, None)
    if seen != files:
        wrong = sorted(set(seen) ^ set(files)) or sorted(n for n in files if seen[n] != files[n])
        raise BackupError(
            f"{len(wrong)} of the archive's files do not match its manifest: it is corrupt"
        )
    if any(not (n.startswith(("database/", "home/")) or _OBJECT.match(n)) for n in files):
        raise BackupError("the archive holds a file no backup writes")
    return told


def restore(
    config: Config,
    archive: Path,
    master: bytes,
    echo: Callable[[str], None] = print,
    *,
    log: IO[str] | None = None,
) -> Summary:
    """Restore the archive into the (empty) store and object store `config` names. Verified
    whole first; then the objects go in, then every row in one transaction, then the
    migrations bring the schema to this code's newest."""
    told = verify(archive, master)
    echo(f"archive verified: {sum(told['tables'].values())} rows, {told['objects']} objects")
    config = dataclasses.replace(config, master_key_hex=master.hex())
    engine = create_engine(config.database_url)
    try:
        with engine.connect() as conn:
            if dump.tables(conn):
                raise BackupError("the target store is not empty: restore into a new home")
        with _object_store(config, log) as target, tarfile.open(archive, "r:") as tar:
            copier = object_copier(target)
            org_keys = _org_keys(tar, told)
            for name in told["files"]:
                if found := _OBJECT.match(name):
                    org, sha256 = found.groups()
                    if org not in org_keys:
                        raise BackupError("the archive holds an object of an org without a key")
                    key = copier.key_of(org, org_keys[org], sha256)
                    source = tar.extractfile(name)
                    assert source is not None
                    copier.put(org, sha256, key, source)
            echo(f"objects: {told['objects']} stored, each checked against its sha256")
            # The schema, every row and the migrations to this code's newest in one
            # transaction: a restore that fails here leaves the store empty.
            with engine.connect() as conn:
                dump.upgrade(conn, told["revision"])
                lines = ((t, _lines(tar, f"database/{t}.jsonl")) for t in told["order"])
                dump.load(conn, lines)
                dump.upgrade(conn, "head")
                conn.commit()
            for name in HOME_FILES:
                if f"home/{name}" in told["files"]:
                    path = config.home / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(f"home/{name}")
                    assert source is not None
                    path.write_bytes(source.read())
        echo(f"database: {sum(told['tables'].values())} rows restored, schema migrated")
    finally:
        engine.dispose()
    return Summary(
        archive,
        told["revision"],
        sum(told["tables"].values()),
        told["objects"],
        told["object_bytes"],
    )


def _lines(tar: tarfile.TarFile, name: str) -> Iterator[dict[str, Any]]:
    source = tar.extractfile(name)
    assert source is not None
    for line in source:
        yield json.loads(line)


def _org_keys(tar: tarfile.TarFile, told: dict[str, Any]) -> dict[str, bytes]:
    """Each org's wrapped data key, from the archive's rows."""
    if "database/org_keys.jsonl" not in told["files"]:
        return {}
    return {
        row["org"]: base64.b64decode(row["wrapped"])
        for row in _lines(tar, "database/org_keys.jsonl")
    }


@contextlib.contextmanager
def _object_store(config: Config, log: IO[str] | None) -> Iterator[Config]:
    """The object store to restore into: the one configured, else the new home's own
    SeaweedFS, started for the restore and stopped after."""
    if config.s3_endpoint:
        yield config
        return
    store = SeaweedFS(config.home, Output(log or open(os.devnull, "w")))  # noqa: SIM115
    try:
        store.wait_ready(config.s3_bucket)
        yield dataclasses.replace(
            config,
            s3_endpoint=store.endpoint,
            s3_access_key=store.access_key,
            s3_secret_key=store.secret_key,
        )
    finally:
        store.stop()
