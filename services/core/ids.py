"""Resource ids: a short type prefix and 16 hex digits."""

from __future__ import annotations

import hashlib
import re
import secrets

ID_PATTERN = re.compile(r"^[a-z]{3}_[0-9a-f]{16}$")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def derived_id(prefix: str, *parts: str) -> str:
    """An id determined by its parts, so the same request always names the same resource."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return f"{prefix}_{digest[:16]}"


def is_id(value: str, prefix: str) -> bool:
    return bool(ID_PATTERN.match(value)) and value.startswith(prefix + "_")
