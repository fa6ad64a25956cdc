"""The estimate's expected run: priced on the device class the connected executors that can
take a job would run it on, at the step times the org's succeeded jobs measured there."""

from __future__ import annotations

import grpc
from google.protobuf import struct_pb2

from services.claims.store import ExecutorRow
from services.core import ids, tables
from services.core.offers import Offer
from services.core.states import JobStatus
from services.core.store import Store, utcnow
from services.core.tables import TaskRow
from services.jobs import store as jobs_store
from tests.integration.test_jobs import FIXTURE, Api
from trainyard.job.v1 import job_service_pb2


def estimate(api: Api, steps: int) -> job_service_pb2.EstimateJobResponse:
    body = struct_pb2.Struct()
    body.update({**FIXTURE, "hyperparameters": {"max_steps": steps}})
    return api.call("EstimateJob", job_service_pb2.EstimateJobRequest(body=body))  # type: ignore[no-any-return]


def connect_cpu_executor(store: Store) -> None:
    offer = Offer("local", True, ("fixture-tiny-llm",), ("cpu",), ("full", "lora"), ("checkpoint",))
    now = utcnow()
    with store.unit() as session:
        session.add(
            ExecutorRow(
                id=ids.new_id("exe"),
                org="platform",
                key_id="",
                machine="local",
                platform=True,
                offer=offer.to_json(),
                connected=True,
                create_time=now,
                last_seen=now,
            )
        )


def succeeded_on_cpu(store: Store, org: str, steps: int, training_seconds: float) -> None:
    """A job of the org that ran `steps` steps in `training_seconds` on a CPU, as its rows
    keep it once it succeeded."""
    job_id, now = ids.new_id("job"), utcnow()
    with store.unit() as session:
        job = jobs_store.add_job(
            session,
            job_id=job_id,
            org=org,
            project="default",
            number=1,
            requested_by="",
            spec={"base_model": "fixture-tiny-llm"},
            spec_sha256="",
            plan={"planned_steps": steps},
            reads_sha256="",
            key="",
            shape_sha256="",
            now=now,
        )
        session.flush([job])  # before what refers to it, as a create does
        job.status = JobStatus.SUCCEEDED
        attempt = tables.attempts_read(session)[job_id, 1]
        attempt.status, attempt.training_seconds = "succeeded", training_seconds
        session.add(
            TaskRow(
                id=ids.new_id("tsk"),
                org=org,
                job_id=job_id,
                attempt_number=1,
                position=0,
                role="lead",
                status="done",
                device="cpu",
                devices=1,
                create_time=now,
            )
        )


def test_the_expected_run_follows_the_executors_and_the_measured_steps(
    channel: grpc.Channel, keys: dict[str, str], store: Store
) -> None:
    api = Api(channel, keys["acme"])
    # No executor connected: what the job allows decides (cpu or cuda: a GPU's price).
    alone = estimate(api, 5)
    assert alone.device_class == "gpu"
    # 5 steps of 0.5 s and 5 s saving: the fixture's profile, not 1,800 s.
    assert alone.expected.device_seconds == 8
    assert alone.duration_components.post_processing_tolerance_seconds == 1800
    connect_cpu_executor(store)
    on_cpu = estimate(api, 5)
    assert on_cpu.device_class == "cpu"
    assert on_cpu.expected.device_seconds == 8
    assert on_cpu.expected.micro_cents == 8 * 8_000_000 // 3600
    # A 10-step job whose trainer's loop took 50 s on a CPU: 5 s a step.
    succeeded_on_cpu(store, "acme", 10, 50.0)
    measured = estimate(api, 5)
    assert measured.device_class == "cpu"
    assert measured.expected.device_seconds == 5 * 5 + 5
    # Another org's runs are not this org's measurements.
    other = estimate(Api(channel, keys["globex"]), 5)
    assert other.expected.device_seconds == 8
