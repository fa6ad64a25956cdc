"""The contract between the executor and a trainer subprocess.

The executor starts `python -m <trainer> <task.json>` in the task's work directory.
`task.json` holds the job as read, the task, and where to write outputs. The trainer
writes one JSON object per line on stdout:

    {"type": "status", "status": "running"}                 accepted | running | evaluating | finalizing
    {"type": "coordinator", "addr": "host:port"}             a lead that coordinates a world
    {"type": "metric", "name": "loss", "step": 3, "value": 2.1}
    {"type": "log", "line": "…"}
    {"type": "output", "path": "out/", "step": 40}          a directory to pack and upload
    {"type": "result", "evaluation": {…}, "outcome": {…}, "step": 57, "served_step": 50,
     "base_sha256": "…", "dataset_sha256": "…", "training_seconds": 31.2,
     "checkpoint_step": 57}
    {"type": "status", "status": "cancelled"}               stopped before anything was trained

SIGTERM asks for a cooperative stop: finish the step, write what was trained, report it,
exit 0. Any other exit without a result is a failed run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TASK_FILE = "task.json"


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()
