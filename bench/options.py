"""The training options only a GPU runs (`bench/gpu_options.json`), each a fixture job's
trainer run as the executor runs it, printing its first and last loss, median tokens/s
and wall time beside the fp32 reference run of the same recipe. Entries whose devices the
machine lacks are skipped, so on a CPU only the reference runs. `bench/gpu.sh` calls it.

    python -m bench.options [--steps 30] [--only NAME]
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
from typing import Any

from google.protobuf import json_format

from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.training.catalog import Catalog

LIST = Path(__file__).with_name("gpu_options.json")
SPEC = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}


def trainer_run(work: Path, hyperparameters: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """The trainer's events for a job of these hyperparameters, and its wall time."""
    service = JobCreation(None, Catalog(), Config.from_env({}), None)  # type: ignore[arg-type]
    admitted = service.admit(
        Principal("k", "bench", "member"),
        parse_json_job({**SPEC, "hyperparameters": hyperparameters}),
    )
    job = json_format.MessageToDict(admitted.job, preserving_proto_field_name=True)
    job["id"] = "job_0000000000000001"
    work.mkdir(parents=True)
    (work / "task.json").write_text(
        json.dumps({"job": job, "task": {}, "output_dir": str(work / "output")})
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "executor.train", str(work / "task.json")],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"trainer failed: {done.stderr[-2000:]}")
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")], elapsed


def series(events: list[dict[str, Any]], name: str) -> list[float]:
    return [e["value"] for e in events if e["type"] == "metric" and e["name"] == name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    import torch

    have = {"cpu", "cuda"} if torch.cuda.is_available() else {"cpu"}
    for entry in json.loads(LIST.read_text()):
        if args.only and entry["name"] != args.only:
            continue
        if not have & set(entry["devices"]):
            print(f"{entry['name']}: skipped, needs {','.join(entry['devices'])}")
            continue
        hp = {"max_steps": args.steps, "save_steps": args.steps, **entry["hyperparameters"]}
        with tempfile.TemporaryDirectory() as tmp:
            events, wall = trainer_run(Path(tmp) / "run", hp)
        loss, rates = series(events, "loss"), series(events, "tokens_per_second")[1:]
        print(
            f"{entry['name']}: loss {loss[0]:.4f} -> {loss[-1]:.4f}, "
            f"{statistics.median(rates or [0.0]):,.0f} tokens/s, {wall:.1f} s wall"
        )


if __name__ == "__main__":
    main()
