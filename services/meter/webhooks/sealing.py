"""Webhook signing secrets: made at create, shown once, kept sealed with AES-GCM under a
key derived from the master key and bound to the endpoint's org and id, and opened only
to sign an attempt. No answer after the create's, no log line and no audit row carries
one."""

from __future__ import annotations

import base64
import secrets

from services.core import keys

PREFIX = "whsec_"
# Standard Webhooks secrets are 24 to 64 random bytes, base64 after `whsec_`.
SECRET_BYTES = 32


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class Sealer:
    """Seals an endpoint's secret under the master key, bound to its org and id."""

    def __init__(self, master: bytes) -> None:
        self._sealer = keys.Sealer(master, "webhook-secrets")

    def seal(self, org: str, webhook_id: str, secret: str) -> bytes:
        return self._sealer.seal(f"{org}/{webhook_id}", secret.encode())

    def open(self, org: str, webhook_id: str, sealed: bytes) -> str:
        return self._sealer.open(f"{org}/{webhook_id}", sealed).decode()
