"""Training throughput through Trainyard against the same DeepSpeed loop run bare, and
create-to-first-step latency, in one run.

- through Trainyard: a fixture job created over gRPC on a stack with its local executor;
  tokens/s is the median of the trainer's per-step `tokens_per_second`;
- bare: the same model, data order, batches and DeepSpeed config in this process, with
  no executor, reports or events, timed the same way;
- latency: CreateJob to the job's first `loss` event, created once the executor's warm
  trainer (a trainer process with its imports done, see executor/warm.py) is ready, as
  for any job that finds the executor idle.

    python bench/training.py [--steps 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from google.protobuf import json_format, struct_pb2

from bench.stack import running
from services.core.config import Config
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc

SPEC = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}


def wait_warm(log: Path, timeout: float = 300) -> None:
    """Until the executor's warm trainer has its imports done (it says so in its log)."""
    deadline = time.monotonic() + timeout
    while not (log.exists() and " ready " in log.read_text()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no warm trainer became ready ({log})")
        time.sleep(0.1)


def through_trainyard(steps: int) -> tuple[float, float, dict]:  # type: ignore[type-arg]
    with running() as (ends, keys, config):
        wait_warm(config.home / "executor" / "local" / "warm.log")
        md = [("authorization", f"Bearer {keys['member']}")]
        stub = job_service_pb2_grpc.JobServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{ends.gateway_port}")
        )
        body = struct_pb2.Struct()
        body.update({**SPEC, "hyperparameters": {"max_steps": steps, "save_steps": steps}})
        started = time.perf_counter()
        job = stub.CreateJob(job_service_pb2.CreateJobRequest(body=body), metadata=md)
        after, first_step = 0, None
        while first_step is None:  # long-poll the events until the first step
            page = stub.ListJobEvents(
                job_service_pb2.ListJobEventsRequest(id=job.id, after=after, wait=25),
                metadata=md,
                timeout=40,
            )
            after = page.next_after
            if any(e.type == "metric" and e.name == "loss" for e in page.events):
                first_step = time.perf_counter() - started
        # Then look rarely, so the measurement takes no CPU from the run it measures.
        while stub.GetJob(job_service_pb2.GetJobRequest(id=job.id), metadata=md).status not in (
            "succeeded",
            "failed",
            "cancelled",
        ):
            time.sleep(2)
        series = stub.ListJobMetrics(
            job_service_pb2.ListJobMetricsRequest(id=job.id, names=["tokens_per_second"]),
            metadata=md,
        ).series[0]
        final = stub.GetJob(job_service_pb2.GetJobRequest(id=job.id), metadata=md)
        rates = [p.value for p in series.points][1:]  # the first step warms up
        return statistics.median(rates), first_step, json_format.MessageToDict(final)


def bare(steps: int) -> float:
    """The trainer's loop with nothing around it."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import json
    import socket

    import deepspeed
    import torch
    import torch.distributed as dist

    from executor.models import fixture
    from executor.trainers.language import data
    from executor.wire.plan import Plan
    from services.core.auth import Principal
    from services.core.validation import parse_json_job
    from services.jobs.create import JobCreation
    from trainyard.training.catalog import Catalog

    service = JobCreation(None, Catalog(), Config.from_env({}), None)  # type: ignore[arg-type]
    admitted = service.admit(
        Principal("k", "bench", "member"),
        parse_json_job({**SPEC, "hyperparameters": {"max_steps": steps, "save_steps": steps}}),
    )
    job = json_format.MessageToDict(admitted.job, preserving_proto_field_name=True)
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "task.json").write_text(
            json.dumps({"job": job, "task": {}, "output_dir": work})
        )
        plan = Plan.load(Path(work) / "task.json")
        trainset, _, _ = data.examples(plan)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update(
        RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    model = fixture.build()
    hp = job["hyperparameters"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(hp["learning_rate"]))
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer, dist_init_required=False,
        config={"train_micro_batch_size_per_gpu": int(hp["per_device_train_batch_size"]),
                "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 0},
                "zero_allow_untested_optimizer": True, "gradient_clipping": 1.0, "steps_per_print": 10**9},
    )  # fmt: skip
    rates = []
    for batch in data.step_batches(len(trainset), plan):
        tick = time.perf_counter()
        micro = data.my_share(batch, plan)
        total = max(1, sum(trainset[i].trained_tokens for m in micro for i in m))
        for index, group in enumerate(micro):
            engine.set_gradient_accumulation_boundary(index == len(micro) - 1)
            ids, labels, mask = fixture.collate([trainset[i] for i in group])
            logits = engine(input_ids=ids, attention_mask=mask).logits.float()
            loss = (
                torch.nn.functional.cross_entropy(
                    logits.view(-1, logits.size(-1)),
                    labels.view(-1),
                    ignore_index=fixture.IGNORE,
                    reduction="sum",
                )
                / total
            )
            engine.backward(loss, scale_wrt_gas=False)
            engine.step()
        rates.append(sum(len(trainset[i].input_ids) for i in batch) / (time.perf_counter() - tick))
    dist.destroy_process_group()
    return statistics.median(rates[1:])


def bare_in_a_fresh_process(steps: int) -> float:
    done = subprocess.run(
        [sys.executable, __file__, "--steps", str(steps), "--bare"],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        print(bare(args.steps))
        return
    # The bare loop runs in clean processes before and after, so drift on a shared
    # machine falls on both sides of the comparison.
    before = bare_in_a_fresh_process(args.steps)
    served, latency, job = through_trainyard(args.steps)
    after = bare_in_a_fresh_process(args.steps)
    raw = (before + after) / 2
    print(
        f"fixture job, {args.steps} steps, effective batch {job['effectiveBatchSize']}, CPU, {os.cpu_count()} cores"
    )
    print(f"through Trainyard: {served:,.0f} tokens/s (status {job['status']})")
    print(
        f"bare DeepSpeed loop: {raw:,.0f} tokens/s (runs before and after: {before:,.0f}, {after:,.0f})"
    )
    print(f"ratio: {served / raw:.3f}")
    print(f"create to first step: {latency:.2f} s (the executor's warm trainer ready)")


if __name__ == "__main__":
    main()
