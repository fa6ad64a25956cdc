"""An org's objects in and out of a backup, still encrypted.

The store answers an object's plaintext to a reader holding its SSE-C key, so a backup
seals each object again before it leaves: AES-GCM under the object's own key (HMAC of the
org's data key and its sha256, as SSE-C uses), in segments, each bound to the object's
org, hash, position and whether it is the last, so a segment moved, dropped or cut short
fails to open. The org's data key travels only wrapped under the master key, in the
database's rows; without the master key a backup's objects are ciphertext.

Hand-written because `cryptography` has no streaming AEAD: each segment is one AES-GCM
message of its own."""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable, Iterator
from typing import IO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.orm import Session

from services.artifacts.crypto import KeyWrap, OrgKeys, object_key
from services.artifacts.objects import CHUNK, ObjectStore
from services.core.config import Config
from services.core.store import utcnow

MAGIC = b"TYOBJ1"
SEGMENT = 4 * CHUNK
# A segment's length word's top bit: it is the object's last (the AAD binds it too).
_LAST = 1 << 31


class Unreadable(ValueError):
    """A sealed object does not open: altered, cut short or under another key."""


class ObjectCopier:
    """Reads the deployment's objects out sealed, and writes sealed ones back in."""

    def __init__(self, config: Config) -> None:
        self._wrap = KeyWrap(config.master_key())
        self._objects = ObjectStore(config)
        self._keys = OrgKeys(self._wrap, utcnow)

    def key(self, session: Session, org: str, sha256: str) -> bytes:
        """The object's key, from its org's data key as the store holds it."""
        return object_key(self._keys.get(session, org), sha256)

    def key_of(self, org: str, wrapped: bytes, sha256: str) -> bytes:
        """The object's key, from its org's data key as a backup's rows carry it."""
        return object_key(self._wrap.unwrap(org, wrapped), sha256)

    def seal_out(self, org: str, sha256: str, key: bytes, out: IO[bytes]) -> int:
        """Write the stored object, checked against its sha256, sealed to `out`; returns
        its size. Raises the store's error when it is gone."""
        return seal(self._objects.stream(org, sha256, key), org, sha256, key, out)

    def put(self, org: str, sha256: str, key: bytes, sealed: IO[bytes]) -> None:
        """Store a sealed object under its SSE-C key, checking it opens to its sha256
        before the store keeps it."""
        plain = _Plain(unseal(sealed, org, sha256, key), sha256)
        self._objects.upload(org, sha256, key, plain)


def _nonce(prefix: bytes, index: int) -> bytes:
    return prefix + struct.pack(">I", index)


def _aad(org: str, sha256: str, index: int, last: bool) -> bytes:
    return f"{org}/{sha256}/{index}/{int(last)}".encode()


def seal(chunks: Iterable[bytes], org: str, sha256: str, key: bytes, out: IO[bytes]) -> int:
    aead, prefix = AESGCM(key), os.urandom(8)
    out.write(MAGIC + prefix)
    size, index, pending = 0, 0, b""

    def segment(data: bytes, last: bool) -> None:
        sealed = aead.encrypt(_nonce(prefix, index), data, _aad(org, sha256, index, last))
        out.write(struct.pack(">I", len(sealed) | (_LAST if last else 0)) + sealed)

    for chunk in chunks:
        size += len(chunk)
        pending += chunk
        while len(pending) > SEGMENT:
            segment(pending[:SEGMENT], False)
            pending, index = pending[SEGMENT:], index + 1
    segment(pending, True)
    return size


def unseal(sealed: IO[bytes], org: str, sha256: str, key: bytes) -> Iterator[bytes]:
    """The plaintext of a sealed object, segment by segment; Unreadable when any segment
    does not open or the last is missing."""
    head = sealed.read(len(MAGIC) + 8)
    if head[: len(MAGIC)] != MAGIC or len(head) != len(MAGIC) + 8:
        raise Unreadable()
    aead, prefix, index = AESGCM(key), head[len(MAGIC) :], 0
    while True:
        length = sealed.read(4)
        if len(length) != 4:
            raise Unreadable()
        (word,) = struct.unpack(">I", length)
        last, body = bool(word & _LAST), sealed.read(word & ~_LAST)
        try:
            yield aead.decrypt(_nonce(prefix, index), body, _aad(org, sha256, index, last))
        except InvalidTag:
            raise Unreadable() from None
        if last:
            return
        index += 1


class _Plain:
    """A file-like reader of an unsealed object that fails its last read unless the bytes
    hash to the name, so an upload of other bytes never completes."""

    def __init__(self, chunks: Iterator[bytes], sha256: str) -> None:
        self._chunks, self._sha256 = chunks, sha256
        self._digest, self._buffer, self._done = hashlib.sha256(), b"", False

    def read(self, size: int = -1) -> bytes:
        while not self._done and (size < 0 or len(self._buffer) < size):
            chunk = next(self._chunks, None)
            if chunk is None:
                self._done = True
                if self._digest.hexdigest() != self._sha256:
                    raise Unreadable()
                break
            self._digest.update(chunk)
            self._buffer += chunk
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data
