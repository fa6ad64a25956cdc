"""Per-org encryption: each org's 32-byte data key, wrapped under the master key, and the
SSE-C key of each object derived from it.

The object store encrypts every object with the key sent in its SSE-C headers (so no
plaintext reaches its disks); an object's key is HMAC(org key, sha256), so a grant or a
download URL discloses the key of that one object and nothing else of the org's.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import os
from collections.abc import Callable

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.orm import Session

from services.artifacts import store
from services.core import errors, keys

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


class OrgKeys:
    """Each org's data key as its row holds it, unwrapped within the unit that needs it."""

    def __init__(self, wrap: KeyWrap, clock: Callable[[], dt.datetime]) -> None:
        self._wrap = wrap
        self._now = clock

    def get(self, session: Session, org: str, *, create: bool = False) -> bytes:
        """The org's key; its first grant (`create`) makes it, and an org without one has
        nothing to find."""
        row = store.org_key(session, org)
        if row is None:
            if not create:
                raise errors.NotFound()
            row = store.add_org_key(session, org, self._wrap.new_wrapped(org), self._now())
        return self._wrap.unwrap(org, row.wrapped)

    def exists(self, session: Session, org: str) -> bool:
        return store.org_key(session, org) is not None

    def object_key(self, session: Session, org: str, sha256: str, *, create: bool = False) -> bytes:
        return object_key(self.get(session, org, create=create), sha256)

    def deleted_digest(self, session: Session, org: str, sha256: str) -> str:
        return deleted_digest(self.get(session, org), sha256)


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
