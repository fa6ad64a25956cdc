"""A whole stack on a temporary home for one benchmark run, stopped when it ends."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from infra.stack import Endpoints, Stack, ensure_key
from services.core.config import Config


@contextlib.contextmanager
def running(**env: str) -> Iterator[tuple[Endpoints, dict[str, str], Config]]:
    """The stack's endpoints, keys by role (`member`, `executor`, `platform`) of the org
    `bench`, and its configuration."""
    with tempfile.TemporaryDirectory() as home:
        config = Config.from_env({"TRAINYARD_HOME": home, "TRAINYARD_GATEWAY_PORT": "0", **env})
        with open(Path(home) / "stack.log", "w") as log:
            stack = Stack(config, output=log)
            try:
                endpoints = stack.start()
                keys = {
                    role: ensure_key(
                        config, config.home / f"{role}.key", org="bench", role=role, label="bench"
                    )
                    for role in ("member", "executor", "platform")
                }
                yield endpoints, keys, config
            finally:
                stack.stop()
