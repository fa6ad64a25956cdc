"""Webhook signing secrets: made at create, shown once, kept sealed with AES-GCM under a
key derived from the master key and bound to the endpoint's org and id, and opened only
to sign an attempt. No answer after the create's, no log line and no audit row carries
one."""

from __future__ import annotations

import base64
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.core import errors, keys

PREFIX = "whsec_"
# Standard Webhooks secrets are 24 to 64 random bytes, base64 after `whsec_`.
SECRET_BYTES = 32


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class Sealer:
    """Seals an endpoint's secret under the master key, bound to its org and id."""

    def __init__(self, master: bytes) -> None:
        self._aead = AESGCM(keys.derive(master, "webhook-secrets"))

    def seal(self, org: str, webhook_id: str, secret: str) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, secret.encode(), f"{org}/{webhook_id}".encode())

    def open(self, org: str, webhook_id: str, sealed: bytes) -> str:
        try:
            plain = self._aead.decrypt(sealed[:12], sealed[12:], f"{org}/{webhook_id}".encode())
        except InvalidTag:
            raise errors.Unavailable() from None  # the master key changed under the row
        return plain.decode()
