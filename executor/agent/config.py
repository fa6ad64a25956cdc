"""How an executor runs: where it connects, what it declares in its hello, and how it keeps
its tasks' work."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path

from executor.agent.disk import MARGIN_BYTES
from executor.agent.transfers import PATIENCE_SECONDS
from executor.trainers import registry
from trainyard.channels import Tls


@dataclasses.dataclass
class AgentConfig:
    url: str
    api_key: str
    # How an https:// gateway is verified, and the client certificate shown to it.
    tls: Tls = dataclasses.field(default_factory=Tls)
    machine: str = dataclasses.field(
        default_factory=lambda: socket.gethostname().split(".")[0].lower()
    )
    devices: tuple[str, ...] = ("cpu",)
    platform: bool = False
    slots: int = 1
    trainer: str = "executor.train"
    work_root: Path = Path(".trainyard/executor")
    bases: tuple[str, ...] = ("fixture-tiny-llm",)
    # Where `bases` is read again (the models directory's catalog), so a model placed there
    # is announced on the open stream without a restart; None keeps `bases` as given.
    bases_now: Callable[[], tuple[str, ...]] | None = None
    # What the registered trainers support together (`executor.trainers.registry`).
    adaptations: tuple[str, ...] = dataclasses.field(
        default_factory=lambda: registry.supported().adaptations
    )
    outputs: tuple[str, ...] = dataclasses.field(
        default_factory=lambda: registry.supported().outputs
    )
    terms: tuple[str, ...] = dataclasses.field(default_factory=lambda: registry.supported().terms)
    protect: tuple[str, ...] = dataclasses.field(
        default_factory=lambda: registry.supported().protect
    )
    # How long an upload or an input read keeps trying through a store that does not answer.
    patience_seconds: float = PATIENCE_SECONDS
    # Append every event sent and every acknowledgement to this file (for audits of the wire).
    journal: Path | None = None
    # Training clients held at once (each an engine subprocess); 0 serves none.
    clients: int = 0
    # Keep a trainer process ready with its imports done, for the next task to start in.
    warm: bool = True
    # Keep every task's work directory (debugging); else a task's goes once it is dropped,
    # and a failed one's log and plan after `failed_work_seconds`.
    keep_work: bool = False
    failed_work_seconds: float = 24 * 3600.0
    # The work area's disk: a task is refused (it fails with `executor_disk_full`) when the
    # disk's free space, or what `work_budget_bytes` (> 0) leaves of the work area, is
    # below its base's size (`base_size`, by base name) and `disk_margin_bytes`.
    work_budget_bytes: int = 0
    disk_margin_bytes: int = MARGIN_BYTES
    base_size: Callable[[str], int] = lambda _name: 0
