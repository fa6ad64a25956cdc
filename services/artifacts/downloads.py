"""Download URLs that work alone: `<gateway>/v1/train/downloads/<token>`, where the token
is the credential. It is sealed (AES-GCM under a key derived from the master key), so it
is opaque, cannot be altered or forged, and names the org, the object and the second it
stops working; the artifacts service opens it, reads the object under the org's key and
serves the bytes once they hash to their name. The object store keeps its per-org
encryption: the URL discloses no key.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.core import errors

DOWNLOAD_SECONDS = 600
PATH = "/v1/train/downloads/"
_PURPOSE = b"trainyard download v1"
_NONCE = 12
_HEADER = struct.Struct(">Q32s")  # expiry in Unix seconds, the object's sha256
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,512}")


@dataclasses.dataclass(frozen=True)
class Ticket:
    """What a token opens to: one object of one org, until `expires` (Unix seconds)."""

    org: str
    sha256: str
    expires: int


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class DownloadTokens:
    """Seals and opens download tokens; `base_url` is where clients reach the gateway."""

    def __init__(self, key: bytes, base_url: str) -> None:
        self._aead = AESGCM(key)
        self._base = base_url.rstrip("/")

    def seal(self, ticket: Ticket) -> str:
        nonce = os.urandom(_NONCE)
        plain = _HEADER.pack(ticket.expires, bytes.fromhex(ticket.sha256)) + ticket.org.encode()
        return _b64(nonce + self._aead.encrypt(nonce, plain, _PURPOSE))

    def url(self, ticket: Ticket) -> str:
        return f"{self._base}{PATH}{self.seal(ticket)}"

    def open(self, token: str, now: int) -> Ticket:
        """The ticket a token holds; NOT_FOUND, saying nothing more, when it is malformed,
        altered, forged or past its expiry."""
        if not _TOKEN.fullmatch(token):
            raise errors.NotFound()
        try:
            raw = _unb64(token)
            plain = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _PURPOSE)
            expires, digest = _HEADER.unpack_from(plain)
            org = plain[_HEADER.size :].decode()
        except (InvalidTag, ValueError, binascii.Error, struct.error, UnicodeDecodeError):
            raise errors.NotFound() from None
        if expires <= now or not org:
            raise errors.NotFound()
        return Ticket(org=org, sha256=digest.hex(), expires=expires)
