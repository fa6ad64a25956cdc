"""The trainer alone on this machine's accelerator (CUDA with bf16 where there is one,
else the CPU): the fixture job's tokens/s and wall time, straight from its events.

    python -m bench.trainer [--steps 60] [--batch 4] [--seq 256] [--precision bf16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from google.protobuf import json_format

from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.training.catalog import Catalog


def _default_precision() -> str:
    """bf16 on a GPU that has it (the job's `base_load_precision`), else fp32."""
    import torch

    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default=_default_precision())
    args = parser.parse_args()
    spec = {
        "base_model": "fixture-tiny-llm",
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "resources": {"budget": 100},
        "hyperparameters": {
            "max_steps": args.steps,
            "save_steps": args.steps,
            "per_device_train_batch_size": args.batch,
            "max_seq_length": args.seq,
            "base_load_precision": args.precision,
        },
    }
    service = JobCreation(None, Catalog(), Config.from_env({}), None)  # type: ignore[arg-type]
    job = json_format.MessageToDict(
        service.admit(Principal("k", "bench", "member"), parse_json_job(spec)).job,
        preserving_proto_field_name=True,
    )
    job["id"] = "job_0000000000000000"
    with tempfile.TemporaryDirectory() as work:
        task = Path(work) / "task.json"
        task.write_text(
            json.dumps(
                {"job": job, "task": {"rank": 0, "world_size": 1}, "output_dir": f"{work}/out"}
            )
        )
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "executor.train", str(task)],
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - started
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rates = [e["value"] for e in events if e.get("name") == "tokens_per_second"][1:]
    losses = [e["value"] for e in events if e.get("name") == "loss"]
    result = next(e for e in events if e["type"] == "result")
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    print(f"device: {device}")
    accumulation = job["hyperparameters"]["gradient_accumulation_steps"]
    print(f"fixture-tiny-llm, {args.steps} steps, batch {args.batch}x{accumulation}")
    print(f"tokens/s (median step): {statistics.median(rates):,.0f}")
    print(f"loss: {losses[0]:.3f} -> {losses[-1]:.3f}")
    print(f"training loop {result['training_seconds']:.1f} s, process wall {wall:.1f} s")


if __name__ == "__main__":
    main()
