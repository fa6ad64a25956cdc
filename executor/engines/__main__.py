"""`python -m executor.engines SPEC.json`: a training client's engine process, as the
executor's `ClientRunner` starts it (the protocol is `executor.engines.lora`'s)."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import torch

from executor.engines.lora import Engine, LoadFailed

log = logging.getLogger(__name__)


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(engine: Engine, work_dir: Path, lines: Any) -> None:
    """Answer each operation line in order until the lines end."""
    for line in lines:
        if not line.strip():
            continue
        try:
            op = json.loads(line)
            seq, kind = int(op["seq"]), str(op["kind"])
            body = op.get("input") or {}
        except (ValueError, KeyError, TypeError):
            log.error("an operation line could not be read; skipping it")
            continue
        _say(engine.apply(seq, kind, body, work_dir / f"weights-{seq}"))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    spec = json.loads(Path(args[0]).read_text())
    threads = os.environ.get("TRAINYARD_ENGINE_THREADS") or os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(max(1, int(threads)) if threads else min(2, os.cpu_count() or 1))
    work_dir = Path(spec.get("work_dir") or ".")
    try:
        init_dir = spec.get("init_dir")
        engine = Engine(
            str(spec["base_model"]),
            dict(spec.get("adaptation") or {}),
            int(spec.get("seed") or 0),
            init_dir=Path(init_dir) if init_dir else None,
            with_optimizer=bool(spec.get("with_optimizer")),
        )
    except LoadFailed as exc:
        log.error("client %s: the base could not be loaded (%s)", spec.get("client"), exc.code)
        _say({"failed": exc.code})
        return 1
    except Exception:
        log.exception("client %s: the engine failed to load", spec.get("client"))
        _say({"failed": "engine_failed"})
        return 1
    _say({"ready": True, "vocab_size": engine.vocab_size, "trainable": engine.trainable_count})
    serve(engine, work_dir, sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
