"""A job's recipe run two ways, for bench/training.py and bench/gpu.sh: as the executor
runs its trainer (`python -m executor.train task.json`, its events read back), and as a
bare DeepSpeed loop that trains the same model on the same data order, seed, schedule and
DeepSpeed config (built by the trainer's own `engine_for`) with nothing around it: no
events, evaluation, gradient norm or checkpoint.

Each run is a `Trace`: the loss and tokens/s of every step, the peak memory, and for a
bare run in a fresh process the seconds from the process's start to its first step.

    python -m bench.recipe --bare task.json     the bare loop, its Trace as JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from services.core.auth import Principal
from services.core.config import Config
from services.core.validation import parse_json_job
from services.jobs.create import JobCreation
from trainyard.training import datasets
from trainyard.training.catalog import Catalog


@dataclasses.dataclass
class Trace:
    losses: dict[int, float]
    rates: dict[int, float]  # tokens/s by step
    mfu: dict[int, float] = dataclasses.field(default_factory=dict)
    peak_memory: float = 0.0  # bytes: the GPU's peak allocation, or the process's peak RSS
    # When the first step ended (seconds since the epoch), and the seconds from the start of
    # the process that trained it (`bare_in_a_fresh_process`), imports included.
    first_step_at: float = 0.0
    first_step_seconds: float = 0.0
    # When each step ended, by step (seconds since the epoch), where known.
    at: dict[int, float] = dataclasses.field(default_factory=dict)

    def _steady(self) -> list[int]:
        """The steps the figures count: all but the first (it warms up)."""
        return [s for s in sorted(self.rates) if s > min(self.rates)] or sorted(self.rates)

    def tokens_per_second(self) -> float:
        """The median step's."""
        return statistics.median(self.rates[s] for s in self._steady())

    def measured_at(self) -> float | None:
        """When the counted steps ran (the median of their ends), if known."""
        times = [self.at[s] for s in self._steady() if s in self.at]
        return statistics.median(times) if times else None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def of_json(cls, text: str) -> Trace:
        doc = json.loads(text)
        return cls(
            losses={int(k): v for k, v in doc["losses"].items()},
            rates={int(k): v for k, v in doc["rates"].items()},
            mfu={int(k): v for k, v in doc["mfu"].items()},
            peak_memory=doc["peak_memory"],
            first_step_at=doc.get("first_step_at", 0.0),
            at={int(k): v for k, v in doc.get("at", {}).items()},
        )


def max_relative_difference(ours: dict[int, float], theirs: dict[int, float]) -> float:
    """The largest |a − b| / |b| over the steps both have; they must have the same steps."""
    if set(ours) != set(theirs):
        raise ValueError(f"the runs trained other steps: {sorted(ours)} vs {sorted(theirs)}")
    return max(abs(ours[s] - theirs[s]) / max(abs(theirs[s]), 1e-12) for s in theirs)


def admitted(spec: dict[str, Any]) -> dict[str, Any]:
    """The job as a create admits it (its defaults filled in and planned), as the executor
    reads it."""
    service = JobCreation(None, Catalog.from_env(os.environ), Config.from_env({}), None)  # type: ignore[arg-type]
    job = json_format.MessageToDict(
        service.admit(Principal("k", "bench", "member"), parse_json_job(spec)).job,
        preserving_proto_field_name=True,
    )
    job["id"] = "job_0000000000000000"
    return job


def long_rows(count: int, words: int) -> list[datasets.Row]:
    """Chats whose answers run `words` words, for a throughput check at a realistic
    sequence length (the fixture's chats are a few dozen tokens)."""
    vocabulary = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
    rows = []
    for n in range(count):
        answer = " ".join(vocabulary[(n * 7 + i * 3) % len(vocabulary)] for i in range(words))
        messages = (("user", f"Recite list {n}."), ("assistant", answer))
        rows.append(datasets.Row(f"long-{n:04d}", f"list {n}", (), messages))
    return rows


def task_file(work: Path, job: dict[str, Any], rows: list[datasets.Row] | None = None) -> Path:
    """`task.json` for a one-process run of `job` in `work`; with `rows`, the job trains
    on a snapshot of them rather than its dataset."""
    work.mkdir(parents=True, exist_ok=True)
    job = dict(job)
    doc: dict[str, Any] = {"job": job, "task": {"rank": 0, "world_size": 1}}
    doc["output_dir"] = str(work / "out")
    if rows is not None:
        snapshot = datasets.build_snapshot(rows, "assistant_only")
        (work / "snapshot.jsonl").write_bytes(snapshot.data)
        job["preparation"] = {"snapshot_sha256": snapshot.sha256}
        doc["snapshot_path"] = str(work / "snapshot.jsonl")
    (work / "task.json").write_text(json.dumps(doc))
    return work / "task.json"


def through_trainer(task: Path) -> Trace:
    """The job's trainer as the executor starts it, its step metrics read from its events."""
    done = subprocess.run(
        [sys.executable, "-m", "executor.train", str(task)],
        cwd=task.parent,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the trainer failed ({done.returncode}):\n{done.stderr[-4000:]}")
    series: dict[str, dict[int, float]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{") and (event := json.loads(line)).get("type") == "metric":
            series.setdefault(event["name"], {})[event["step"]] = event["value"]
    peaks = series.get("peak_memory_bytes", {})
    return Trace(
        series["loss"],
        series["tokens_per_second"],
        series.get("mfu", {}),
        max(peaks.values(), default=0.0),
    )


def bare_in_a_fresh_process(task: Path) -> Trace:
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "bench.recipe", "--bare", str(task)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the bare loop failed ({done.returncode}):\n{done.stderr[-4000:]}")
    trace = Trace.of_json(done.stdout.strip().splitlines()[-1])
    trace.first_step_seconds = trace.first_step_at - started
    return trace


def bare(task: Path) -> Trace:
    """The job's recipe with nothing around it, in this process."""
    from executor.trainers import deepspeed
    from executor.wire.plan import Plan

    plan = Plan.load(task)
    traced: list[Trace] = []

    def body() -> int:
        traced.append(_bare_loop(plan))
        return 0

    deepspeed.distributed(plan, lambda _: None, body)
    return traced[0]


def _bare_loop(plan: Any) -> Trace:
    import torch

    from executor.models import bases, fixture
    from executor.trainers.language import batches, data, run

    hp = plan.job.hyperparameters
    loaded = bases.load(plan.job.base_model)
    train, _, _ = data.examples(plan, loaded.codec)
    base = bases.at_precision(loaded.model, hp.base_load_precision)
    model = run.adapted(base, plan, lambda _: None)
    engine, _, _ = run.engine_for(model, plan)
    engine.train()
    trace = Trace({}, {})
    # An empty micro-batch still steps DeepSpeed's count, as the trainer's does.
    idle = batches.padded([fixture.Encoded([loaded.codec.pad], [fixture.IGNORE])], loaded.codec.pad)
    for step, batch in enumerate(data.step_batches(len(train), plan), start=1):
        tick = time.perf_counter()
        mine = [train[i] for i in data.mine(batch, plan)]
        total = max(1, sum(e.trained_tokens for e in mine))
        loss_sum: Any = 0.0
        for rows in batches.micro_batches(
            mine,
            per_device=hp.per_device_train_batch_size,
            accumulation=hp.gradient_accumulation_steps,
            pad=loaded.codec.pad,
            pack_width=hp.max_seq_length if hp.packing else None,
        ):
            summed = run._loss_sum(engine, rows or idle)
            if rows is not None:
                loss_sum = loss_sum + summed.detach()
            engine.backward(
                summed / total if rows is not None else summed * 0.0, scale_wrt_gas=False
            )
            engine.step()
        # As the trainer reports its loss: the step's mean over trained tokens, 6 places.
        trace.losses[step] = round(float(loss_sum) / total, 6)
        elapsed = time.perf_counter() - tick
        trace.rates[step] = sum(len(train[i].input_ids) for i in batch) / elapsed
        trace.at[step] = time.time()
        trace.first_step_at = trace.first_step_at or trace.at[step]
    if torch.cuda.is_available():
        trace.peak_memory = float(torch.cuda.max_memory_allocated())
    else:
        import resource

        trace.peak_memory = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bare", type=Path, required=True, help="the task.json to train")
    print(bare(parser.parse_args().bare).to_json())


if __name__ == "__main__":
    main()
