"""Download tokens: a URL names its object and org only to the service that sealed it,
works until its expiry, and anything altered, forged or late opens to nothing."""

from __future__ import annotations

import pytest

from services.artifacts.downloads import DownloadTokens, Ticket
from services.core import errors

SHA = "ab" * 32
TICKET = Ticket(org="acme", sha256=SHA, expires=1_800_000_600)


def tokens(key: bytes = b"k" * 32) -> DownloadTokens:
    return DownloadTokens(key, "https://train.example/")


def test_a_url_opens_to_its_ticket_until_it_expires() -> None:
    url = tokens().url(TICKET)
    assert url.startswith("https://train.example/v1/train/downloads/")
    token = url.rsplit("/", 1)[-1]
    assert "acme" not in token and SHA not in token  # opaque
    assert tokens().open(token, TICKET.expires - 1) == TICKET
    with pytest.raises(errors.NotFound):
        tokens().open(token, TICKET.expires)


@pytest.mark.parametrize("where", [0, 5, 20, -1])
def test_a_changed_character_opens_to_nothing(where: int) -> None:
    token = tokens().seal(TICKET)
    changed = token[:where] + ("A" if token[where] != "A" else "B") + token[where + 1 :]
    with pytest.raises(errors.NotFound):
        tokens().open(changed[: len(token)], 0)


@pytest.mark.parametrize("token", ["", "x", "a/b", "%2e%2e", "A" * 600, "A" * 40])
def test_anything_not_sealed_here_opens_to_nothing(token: str) -> None:
    with pytest.raises(errors.NotFound):
        tokens().open(token, 0)


def test_another_deployments_token_opens_to_nothing() -> None:
    with pytest.raises(errors.NotFound):
        tokens().open(tokens(b"o" * 32).seal(TICKET), 0)
