"""Per-org encryption: each org's 32-byte data key, wrapped under the master key, and the
SSE-C key of each object derived from it.

The object store encrypts every object with the key sent in its SSE-C headers (so no
plaintext reaches its disks); an object's key is HMAC(org key, sha256), so a grant or a
download URL discloses the key of that one object and nothing else of the org's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.core import keys

SSE_ALGORITHM = "AES256"


class KeyWrap:
    """Wraps and unwraps org data keys with a key derived from the master key."""

    def __init__(self, master: bytes) -> None:
        self._aead = AESGCM(keys.derive(master, "org-key-wrap"))

    def new_wrapped(self, org: str) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, os.urandom(32), org.encode())

    def unwrap(self, org: str, wrapped: bytes) -> bytes:
        return self._aead.decrypt(wrapped[:12], wrapped[12:], org.encode())


def object_key(org_key: bytes, sha256: str) -> bytes:
    return hmac.new(org_key, f"object:{sha256}".encode(), hashlib.sha256).digest()


def deleted_digest(org_key: bytes, sha256: str) -> str:
    """How the org's deletion of an object is remembered: a digest no one without the
    org's key can link to the hash."""
    return hmac.new(org_key, f"deleted:{sha256}".encode(), hashlib.sha256).hexdigest()


def sse_headers(key: bytes) -> dict[str, str]:
    """The SSE-C headers an upload or download of the object must carry."""
    return {
        "x-amz-server-side-encryption-customer-algorithm": SSE_ALGORITHM,
        "x-amz-server-side-encryption-customer-key": base64.b64encode(key).decode(),
        "x-amz-server-side-encryption-customer-key-md5": base64.b64encode(
            hashlib.md5(key).digest()
        ).decode(),
    }
