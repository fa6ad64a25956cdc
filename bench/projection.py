"""What projection costs a decision job a step, against the same job without it, in one
run, for a readout and for a full job on `fixture-tiny-decider`.

Each job is created as a create admits it (`protect.suites` the three known suites),
then run by the trainer as the executor runs it; ms/step is its `training_seconds` over
its steps (one evaluation, at the end). The job without projection is the baseline: it
runs first and after each run with projection, so drift on a shared machine falls on both
sides. The subspace's one-off cost (the protected Jacobian and its SVD, at start) is
timed apart, in process, and printed in the figure's note.

    python bench/projection.py [--steps 300] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from bench.figures import Figure, report
from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.training import decisions
from trainyard.training.catalog import DECIDER_BASE, Catalog

KNOWN = list(decisions.KNOWN_SUITES)


def job(mode: str, projection: bool, steps: int) -> dict[str, Any]:
    protect: dict[str, Any] = {"suites": KNOWN}
    if projection:
        protect["projection"] = {"strength": 1.0}
    spec = {
        "base_model": DECIDER_BASE,
        "dataset": {"uri": decisions.FIXTURE_DATASET},
        "adaptation": {"mode": mode},
        "protect": protect,
        "hyperparameters": {"max_steps": 100, "learning_rate": 0.1},
        "output": {"kind": "capability"},
        "resources": {"budget": 100},
    }
    service = JobCreation(None, Catalog(), Config.from_env({}), None)  # type: ignore[arg-type]
    admitted = service.admit(Principal("k", "bench", "member"), parse_json_job(spec))
    out = json_format.MessageToDict(admitted.job, preserving_proto_field_name=True)
    # A create bounds max_steps at 100; the bench runs longer for a steadier figure.
    out["planned_steps"] = steps
    out["hyperparameters"].update(max_steps=steps, save_steps=steps)
    out["id"] = "job_0000000000000001"
    return out


def ms_per_step(spec: dict[str, Any]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "task.json").write_text(
            json.dumps(
                {"job": spec, "task": {"rank": 0, "world_size": 1}, "output_dir": str(work / "out")}
            )
        )
        done = subprocess.run(
            [sys.executable, "-m", "executor.train", str(work / "task.json")],
            cwd=work,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
            check=True,
        )
    (found,) = [
        json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"type":"result"')
    ]
    return 1000 * float(found["training_seconds"]) / int(found["step"])


def subspace(mode: str) -> tuple[float, int, float]:
    """(seconds, directions, MiB) of the projector a job of `mode` builds at start."""
    import torch

    from executor.models import decider
    from executor.trainers.decisions.projection import protected_subspace

    torch.set_num_threads(1)
    model = decider.build()
    for name, p in model.named_parameters():
        p.requires_grad_(mode == "full" or name in decider.HEAD)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    rows = [r for name in KNOWN for r in decisions.split(decisions.SUITES[name].rows())[0]]
    started = time.perf_counter()
    projector = protected_subspace(model, rows, params, 1.0)
    took = time.perf_counter() - started
    return took, sum(projector.directions().values()), projector.nbytes / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="runs with projection")
    args = parser.parse_args()
    setting = f"{args.steps} steps, effective batch 16, CPU, 1 thread of {os.cpu_count()} cores"
    for mode in ("readout", "full"):
        plain = [ms_per_step(job(mode, False, args.steps))]
        projected = []
        for _ in range(args.runs):
            projected.append(ms_per_step(job(mode, True, args.steps)))
            plain.append(ms_per_step(job(mode, False, args.steps)))
        seconds, directions, mib = subspace(mode)
        report(
            Figure(
                bench="projection",
                name=f"decision job, {mode}, with projection",
                unit="ms/step",
                runs=projected,
                baseline="the same job without projection",
                baseline_unit="ms/step",
                baseline_runs=plain,
                note=f"{setting}; subspace {directions} directions, {mib:.1f} MiB, built in "
                f"{seconds:.2f} s",
            )
        )


if __name__ == "__main__":
    main()
