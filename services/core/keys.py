"""The deployment's master key and the keys derived from it.

The master key (32 random bytes) comes from `TRAINYARD_MASTER_KEY` (hex) or is
generated into `TRAINYARD_HOME/master.key` with mode 0600 on first start. Purposes get
their own subkeys (HMAC-SHA256 of a label), so no two uses share key material.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.core import errors


def master_key(path: Path, env_value: str = "") -> bytes:
    if env_value:
        key = bytes.fromhex(env_value)
        if len(key) != 32:
            raise ValueError("TRAINYARD_MASTER_KEY must be 64 hex digits")
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
    text = ""
    for _ in range(50):  # a process creating it concurrently may not have written it yet
        text = path.read_text().strip()
        if text:
            break
        time.sleep(0.02)
    return bytes.fromhex(text)


def derive(master: bytes, purpose: str) -> bytes:
    return hmac.new(master, purpose.encode(), hashlib.sha256).digest()


def write_master_key(path: Path, key: bytes) -> None:
    """Keep `key` as the home's master key (mode 0600); a home already holding one keeps
    its own, so a restore never replaces the key a home's data is under."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex())


class Sealer:
    """AES-GCM under a key derived from the master key for one purpose, each sealed value
    bound to what it belongs to (`bound`, e.g. `org/name`), so a row's ciphertext opens for
    that row only. A value that does not open (the master key changed under it) is
    UNAVAILABLE, never a wrong plaintext."""

    def __init__(self, master: bytes, purpose: str) -> None:
        self._aead = AESGCM(derive(master, purpose))

    def seal(self, bound: str, plain: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, plain, bound.encode())

    def open(self, bound: str, sealed: bytes) -> bytes:
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], bound.encode())
        except InvalidTag:
            raise errors.Unavailable() from None
