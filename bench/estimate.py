"""The estimate against what a run cost: fixture jobs, each estimated, then created and
run on a stack with its local executor, one after another; each one's estimate ÷ actual
in device-seconds and in price (the first from the base profile, the later ones from the
step times the runs before measured). The estimates are reported as figures beside what
the runs cost, their baseline, in device-seconds and in price.

    python bench/estimate.py [--steps 20] [--runs 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import grpc
from google.protobuf import struct_pb2

from bench.figures import Figure, report
from bench.stack import running
from bench.training import wait_warm
from trainyard.cli_base import exact_dollars
from trainyard.job.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc

SPEC: dict[str, Any] = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}
ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")


def body(steps: int) -> struct_pb2.Struct:
    found = struct_pb2.Struct()
    found.update({**SPEC, "hyperparameters": {"max_steps": steps}})
    return found


def run(
    stub: job_service_pb2_grpc.JobServiceStub, md: list[tuple[str, str]], steps: int
) -> job_pb2.Job:
    """A job of `steps` steps, created and followed until it ends."""
    job = stub.CreateJob(job_service_pb2.CreateJobRequest(body=body(steps)), metadata=md)
    while job.status not in ENDED:
        time.sleep(2)  # look rarely: the measurement takes no CPU from the run
        job = stub.GetJob(job_service_pb2.GetJobRequest(id=job.id), metadata=md)
    return job


def describe(label: str, estimate: job_service_pb2.EstimateJobResponse, job: job_pb2.Job) -> float:
    seconds, price = estimate.expected.device_seconds, estimate.expected.micro_cents
    actual_seconds, actual_price = job.timing.metered_device_seconds, job.cost_micro_cents
    ratio = price / max(actual_price, 1)
    print(
        f"{label}: estimate {seconds:.0f} device-seconds on {estimate.device_class}, "
        f"{exact_dollars(price)}; actual {actual_seconds} device-seconds, "
        f"{exact_dollars(actual_price)}; estimate ÷ actual "
        f"{seconds / max(actual_seconds, 1):.2f} (seconds), {ratio:.2f} (price)"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    with running() as (ends, keys, config):
        wait_warm(config.home / "executor" / "local" / "warm.log")
        md = [("authorization", f"Bearer {keys['member']}")]
        stub = job_service_pb2_grpc.JobServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{ends.gateway_port}")
        )
        request = job_service_pb2.EstimateJobRequest(body=body(args.steps))
        print(f"fixture jobs of {args.steps} steps on the local executor")
        ratios, estimates, jobs = [], [], []
        for number in range(1, args.runs + 1):
            estimate = stub.EstimateJob(request, metadata=md)
            job = run(stub, md, args.steps)
            label = "profile " if number == 1 else "measured"
            ratios.append(describe(f"run {number} ({label}, {job.status})", estimate, job))
            estimates.append(estimate)
            jobs.append(job)
    what = f"fixture jobs of {args.steps} steps, first from the profile"
    report(
        Figure(
            "estimate", f"estimate, device-seconds ({what})", "device-s",
            [e.expected.device_seconds for e in estimates],
            "the runs' metered device-seconds", "device-s",
            [float(j.timing.metered_device_seconds) for j in jobs],
        )
    )  # fmt: skip
    report(
        Figure(
            "estimate", f"estimate, price ({what})", "µ$",
            [e.expected.micro_cents / 100 for e in estimates],
            "the runs' cost", "µ$", [j.cost_micro_cents / 100 for j in jobs],
            note=f"median of each run's estimate ÷ actual: {statistics.median(ratios):.2f}",
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
