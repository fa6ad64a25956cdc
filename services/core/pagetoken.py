"""Opaque page tokens (AIP-158): a position, signed and bound to who asked and with what
filters, so a token is refused when it is altered, forged, or sent with other filters or
by another org."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from services.core import errors

DEFAULT_PAGE_SIZE = 25
MAX_PAGE_SIZE = 100


def page_size(
    requested: int, *, default: int = DEFAULT_PAGE_SIZE, maximum: int = MAX_PAGE_SIZE
) -> int:
    if requested < 0:
        raise errors.ValidationError("page_size", "must not be negative")
    return min(requested or default, maximum)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PageTokens:
    """Signs and checks page tokens with a key derived from the master key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, body: bytes, scope: Mapping[str, Any]) -> bytes:
        bound = json.dumps(scope, sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(self._key, bound + b"\x00" + body, hashlib.sha256).digest()[:16]

    def encode(self, position: Mapping[str, Any], scope: Mapping[str, Any]) -> str:
        """`scope` holds what the token is bound to: the org, the method and the filters."""
        body = json.dumps(position, sort_keys=True, separators=(",", ":")).encode()
        return f"{_b64(body)}.{_b64(self._mac(body, scope))}"

    def decode(self, token: str, scope: Mapping[str, Any]) -> dict[str, Any] | None:
        """The position of `token`, or None for the first page. Anything forged, altered or
        bound to another scope is INVALID_REQUEST."""
        if not token:
            return None
        try:
            body_text, mac_text = token.split(".")
            body, mac = _unb64(body_text), _unb64(mac_text)
            if not hmac.compare_digest(mac, self._mac(body, scope)):
                raise ValueError("bad mac")
            position = json.loads(body)
            if not isinstance(position, dict):
                raise ValueError("bad body")
            return position
        except (ValueError, UnicodeDecodeError):
            raise errors.ValidationError(
                "page_token", "is not a token issued for this request"
            ) from None
