"""The SDK's names for Trainyard's things: a model id `{session}:train:{n}` for a client
id, the checkpoints saved under it, and the samplers, kept in one JSON file under the home.
Nothing in it grants access."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


@dataclasses.dataclass
class Model:
    """A training model as the SDK names it, and the client that is it."""

    model_id: str
    client_id: str
    base_model: str
    lora_rank: int
    user_metadata: dict[str, str]
    created: str
    checkpoints: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class Names:
    """The SDK's names for Trainyard's things, kept in one JSON file (rewritten whole)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.models: dict[str, Model] = {}
        self.samplers: dict[str, dict[str, str]] = {}
        if path.exists():
            raw = json.loads(path.read_text())
            self.models = {k: Model(**v) for k, v in raw.get("models", {}).items()}
            self.samplers = raw.get("samplers", {})

    def by_client(self, client_id: str) -> Model | None:
        return next((m for m in self.models.values() if m.client_id == client_id), None)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "models": {k: dataclasses.asdict(v) for k, v in self.models.items()},
                    "samplers": self.samplers,
                }
            )
        )
        os.replace(tmp, self.path)
