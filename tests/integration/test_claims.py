"""ClaimService over real gRPC on SQLite and PostgreSQL: claims, leases, fencing, reports."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import logging
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import json_format, struct_pb2

from executor.agent.agent import Agent
from executor.agent.config import AgentConfig
from services.claims.server import build_server as build_claims
from services.claims.service import ClaimService
from services.claims.servicer import ClaimServicer
from services.claims.store import ExecutorRow
from services.core import audit, auth, context, tables
from services.core.auth import Principal
from services.core.config import Config
from services.core.offers import Offer
from services.core.store import Store, utcnow
from tests.integration.test_jobs import info_of, reason_of
from tests.support import ServiceThread, eventually
from trainyard.claim.v1 import claim_service_pb2, claim_service_pb2_grpc, task_pb2
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc
from trainyard.ports import free_port

SUPPORTS = task_pb2.Supports(adaptations=["full", "lora"], outputs=["checkpoint", "lora"])


def key(store: Store, org: str, role: str) -> list[tuple[str, str]]:
    with store.unit() as session:
        return [("authorization", f"Bearer {auth.create_key(session, org=org, role=role)[1]}")]


class Wire:
    """An executor speaking the unary routes."""

    def __init__(
        self, claims: ServiceThread, md: list[tuple[str, str]], machine: str, platform: bool = False
    ) -> None:
        self.stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
        self.md, self.machine, self.platform = md, machine, platform

    def claim(self, wait: int = 5) -> claim_service_pb2.ClaimTaskResponse:
        request = claim_service_pb2.ClaimTaskRequest(
            machine=self.machine, platform=self.platform, bases=["fixture-tiny-llm"], devices=["cpu"],
            supports=SUPPORTS, wait=wait,
        )  # fmt: skip
        return self.stub.ClaimTask(request, metadata=self.md, timeout=60)

    def report(
        self,
        claimed: claim_service_pb2.ClaimTaskResponse,
        *events: task_pb2.TaskEvent,
        lease: str = "",
    ):  # type: ignore[no-untyped-def]
        request = claim_service_pb2.ReportTaskRequest(
            id=claimed.task.job,
            task=claimed.task.id,
            lease=lease or claimed.task.lease,
            events=events,
        )
        return self.stub.ReportTask(request, metadata=self.md, timeout=60)

    def refused(self, *args, **kw) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(grpc.RpcError) as caught:
            self.report(*args, **kw)
        return reason_of(caught.value)


def status(seq: int, value: str, **kw: str) -> task_pb2.TaskEvent:
    return task_pb2.TaskEvent(seq=seq, type="status", status=value, **kw)


def metric(seq: int, step: int, value: float) -> task_pb2.TaskEvent:
    return task_pb2.TaskEvent(seq=seq, type="metric", name="loss", step=step, value=value)


@pytest.fixture
def creator(jobs: ServiceThread, store: Store) -> Iterator:  # type: ignore[type-arg]
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    mds: dict[str, list[tuple[str, str]]] = {}

    def create(org: str = "acme", **spec: object):  # type: ignore[no-untyped-def]
        md = mds.setdefault(org, key(store, org, "member"))
        body = struct_pb2.Struct()
        body.update({"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
                     "hyperparameters": {"max_steps": 5},
                     **({} if "resources" in spec else {"resources": {"budget": 100}}), **spec})  # fmt: skip
        job = stub.CreateJob(job_service_pb2.CreateJobRequest(body=body), metadata=md, timeout=30)
        for _ in range(200):
            read = stub.GetJob(job_service_pb2.GetJobRequest(id=job.id), metadata=md, timeout=30)
            if read.preparation.status == "verified":
                return read
            time.sleep(0.05)
        raise AssertionError("never prepared")

    create.get = lambda job_id, org="acme": stub.GetJob(  # type: ignore[attr-defined]
        job_service_pb2.GetJobRequest(id=job_id), metadata=mds[org], timeout=30
    )
    create.cancel = lambda job_id, org="acme": stub.CancelJob(  # type: ignore[attr-defined]
        job_service_pb2.CancelJobRequest(id=job_id), metadata=mds[org], timeout=30
    )
    yield create


def test_an_executor_claims_its_orgs_job_on_its_machine_and_reports(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    assert (
        claimed.org == "acme"
        and claimed.task.role == "lead"
        and claimed.task.lease.startswith("trl_")
    )
    assert claimed.job.id == job.id and claimed.task.device == "cpu" and claimed.task.epoch == 1
    ack = wire.report(
        claimed, status(1, "accepted"), status(2, "running"), metric(3, 1, 2.5), metric(4, 2, 2.0)
    )
    assert (ack.status, ack.seq, ack.cancel) == ("running", 4, False)
    again = wire.report(
        claimed, metric(3, 1, 9.9), metric(4, 2, 9.9), metric(5, 3, 1.5)
    )  # 3, 4 replayed
    assert again.seq == 5
    read = creator.get(job.id)
    assert (
        read.status == "running"
        and read.progress.step == 3
        and read.progress.loss == pytest.approx(1.5)
    )
    with store.unit(write=False) as session:
        values = session.scalars(
            sa.select(tables.MetricRow.value).order_by(tables.MetricRow.step)
        ).all()
    assert list(values) == [2.5, 2.0, 1.5]


def test_a_long_series_reads_cut_to_a_chart_with_its_ends_and_spike(
    creator, config: Config, jobs: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    # The deployment's lease (not the tests' 3 s): on a busy machine the reads below can
    # take longer than that, and a lapsed lease would end the job with events after the
    # series.
    claims = ServiceThread(lambda: build_claims(config, store=store, port=0))
    try:
        long_series_cut(creator, claims, jobs, store)
    finally:
        claims.stop()


def long_series_cut(  # type: ignore[no-untyped-def]
    creator, claims: ServiceThread, jobs: ServiceThread, store: Store
) -> None:
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    wire.report(claimed, status(1, "accepted"), status(2, "running"))
    steps = 20_000
    values = {step: 10.0 / step for step in range(1, steps + 1)}
    values[12_345] = 99.0
    for first in range(1, steps + 1, 500):
        wire.report(
            claimed, *(metric(step + 2, step, values[step]) for step in range(first, first + 500))
        )

    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    md = key(store, "acme", "member")

    def read(max_points: int) -> list[tuple[int, float]]:
        request = job_service_pb2.ListJobMetricsRequest(
            id=job.id, names=["loss"], max_points=max_points
        )
        answer = stub.ListJobMetrics(request, metadata=md, timeout=30)
        # Where a chart goes on following the job's events: after the last one there is.
        events = job_service_pb2.ListJobEventsRequest(id=job.id, after=answer.next_after - 1)
        (last,) = stub.ListJobEvents(events, metadata=md, timeout=30).events
        assert last.seq == answer.next_after
        (series,) = answer.series
        return [(p.step, p.value) for p in series.points]

    assert read(0) == sorted(values.items())
    cut = read(300)
    assert len(cut) <= 300 and cut[0] == (1, 10.0) and cut[-1] == (steps, values[steps])
    assert (12_345, 99.0) in cut and [s for s, _ in cut] == sorted(s for s, _ in cut)
    with pytest.raises(grpc.RpcError) as caught:
        read(4)
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert info_of(caught.value)["field"] == "max_points"


def test_a_point_reported_again_for_its_step_is_kept_once_as_first_reported(
    creator, claims: ServiceThread, jobs: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    wire.report(claimed, status(1, "accepted"), status(2, "running"))
    wire.report(claimed, metric(3, 1, 2.5), metric(4, 2, 0.1 + 0.2))
    wire.report(claimed, metric(5, 1, 7.0), metric(6, 3, 1e-300))
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    request = job_service_pb2.ListJobMetricsRequest(id=job.id, names=["loss"])
    md = key(store, "acme", "member")
    (series,) = stub.ListJobMetrics(request, metadata=md).series
    assert [(p.step, p.value) for p in series.points] == [(1, 2.5), (2, 0.1 + 0.2), (3, 1e-300)]
    # One step twice in one report: the series keeps the first, the events keep both.
    wire.report(claimed, metric(7, 4, 1.5), metric(8, 4, 9.5))
    (series,) = stub.ListJobMetrics(request, metadata=md).series
    assert [(p.step, p.value) for p in series.points][-1] == (4, 1.5)
    events = stub.ListJobEvents(job_service_pb2.ListJobEventsRequest(id=job.id), metadata=md)
    metrics = [e for e in events.events if e.type == "metric"]
    assert [(e.name, e.step, e.value) for e in metrics] == [
        ("loss", 1, 2.5), ("loss", 2, 0.1 + 0.2), ("loss", 1, 7.0),
        ("loss", 3, 1e-300), ("loss", 4, 1.5), ("loss", 4, 9.5),
    ]  # fmt: skip
    assert [e.seq for e in metrics][-2:] == [events.events[-1].seq - 1, events.events[-1].seq]


def test_a_diverged_runs_nan_loss_is_kept_as_its_event_and_is_no_point_of_the_chart(
    creator, claims: ServiceThread, jobs: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    wire.report(claimed, status(1, "accepted"), status(2, "running"), metric(3, 1, 2.5))
    ack = wire.report(claimed, metric(4, 2, math.nan), metric(5, 3, -math.inf))
    assert (ack.status, ack.seq) == ("running", 5)
    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    md = key(store, "acme", "member")
    request = job_service_pb2.ListJobMetricsRequest(id=job.id, names=["loss"])
    (series,) = stub.ListJobMetrics(request, metadata=md).series
    assert [(p.step, p.value) for p in series.points] == [(1, 2.5)]
    events = stub.ListJobEvents(job_service_pb2.ListJobEventsRequest(id=job.id), metadata=md)
    nan, inf = [e for e in events.events if e.type == "metric"][1:]
    assert (nan.step, math.isnan(nan.value), inf.step, inf.value) == (2, True, 3, -math.inf)
    got = stub.GetJob(job_service_pb2.GetJobRequest(id=job.id), metadata=md)
    assert (got.status, got.progress.step) == ("running", 3)


def test_a_report_as_hip_1333_writes_it_carries_no_seq_and_is_numbered_on_arrival(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    assert wire.report(claimed, status(1, "running")).seq == 1
    # HIP-1333 §5's body, as the gateway hands it over (the path names the job).
    body = json.dumps(
        {"task": claimed.task.id, "lease": claimed.task.lease,
         "events": [{"type": "metric", "name": "nll", "step": 100, "value": 0.66}]}
    )  # fmt: skip
    request = json_format.Parse(body, claim_service_pb2.ReportTaskRequest(id=job.id))
    ack = wire.stub.ReportTask(request, metadata=wire.md, timeout=60)
    # Numbered after the highest applied, and the answer says so.
    assert (ack.cancel, ack.status, ack.seq) == (False, "running", 2)
    # A report with numbers keeps exactly-once: replayed, it is applied once.
    assert wire.report(claimed, metric(3, 101, 0.6), metric(4, 102, 0.5)).seq == 4
    assert wire.report(claimed, metric(3, 101, 9.9), metric(4, 102, 9.9)).seq == 4
    # A report without numbers again: numbered after those.
    again = wire.stub.ReportTask(
        json_format.Parse(body, claim_service_pb2.ReportTaskRequest(id=job.id)),
        metadata=wire.md,
        timeout=60,
    )
    assert again.seq == 5
    # Numbered and unnumbered events in one report cannot be told apart: refused.
    with pytest.raises(grpc.RpcError) as caught:
        wire.report(claimed, metric(6, 103, 0.4), task_pb2.TaskEvent(type="log", line="x"))
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert info_of(caught.value)["field"] == "events.seq"
    assert wire.report(claimed).seq == 5  # nothing of it was applied
    with store.unit(write=False) as session:
        points = session.execute(
            sa.select(tables.MetricRow.name, tables.MetricRow.step, tables.MetricRow.value)
            .where(tables.MetricRow.job_id == job.id)
            .order_by(tables.MetricRow.step)
        ).all()
        metric_events = session.scalars(
            sa.select(tables.EventRow.data)
            .where(tables.EventRow.job_id == job.id, tables.EventRow.type == "metric")
            .order_by(tables.EventRow.seq)
        ).all()
    assert [tuple(p) for p in points] == [
        ("nll", 100, 0.66),
        ("loss", 101, 0.6),
        ("loss", 102, 0.5),
    ]
    # Each report applied: the unnumbered one twice (nothing tells a resend), the numbered once.
    assert [(e["name"], e["step"]) for e in metric_events] == [
        ("nll", 100), ("loss", 101), ("loss", 102), ("nll", 100),
    ]  # fmt: skip


def test_a_claim_naming_an_unknown_device_kind_is_refused_with_the_kinds(
    claims: ServiceThread, store: Store
) -> None:
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    request = claim_service_pb2.ClaimTaskRequest(machine="gpu-1", devices=["tpu"], wait=1)
    with pytest.raises(grpc.RpcError) as caught:
        wire.stub.ClaimTask(request, metadata=wire.md, timeout=60)
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert info_of(caught.value)["supported"] == "cuda,rocm,metal,vulkan,cpu"


def test_a_stalled_lease_is_lost_and_changes_nothing(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    wire.report(claimed, status(1, "running"))
    # No report renews the 3-second lease: the service's own sweep ends the task.
    eventually(lambda: creator.get(job.id).status, lambda s: s == "failed", "the lapsed job")
    assert wire.refused(claimed, metric(2, 1, 1.0)) == "LEASE_LOST"
    result = task_pb2.TaskEvent(seq=3, type="result", result=task_pb2.TaskResult(step=5))
    assert wire.refused(claimed, result) == "LEASE_LOST"
    read = creator.get(job.id)
    assert (read.status, read.failure_code, read.failure_category) == (
        "failed",
        "executor_lost",
        "executor",
    )
    assert not read.model_available and read.progress.step == 0


def test_a_report_under_an_old_lease_is_fenced(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    assert wire.refused(claimed, status(1, "running"), lease="trl_forged") == "LEASE_LOST"


def test_two_executors_racing_for_one_task_one_wins(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    creator(resources={"machines": ["gpu-1"]})
    md = key(store, "acme", "executor")
    wins: list[str] = []
    start = threading.Barrier(2)

    def race() -> None:
        start.wait()
        got = Wire(claims, md, "gpu-1").claim(wait=2)
        if got.HasField("task"):
            wins.append(got.task.id)

    threads = [threading.Thread(target=race) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1


def test_a_two_machine_job_offers_its_join_once_the_lead_coordinates(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    creator(resources={"machines": ["m1", "m2"]})
    md = key(store, "acme", "executor")
    lead_wire, join_wire = Wire(claims, md, "m1"), Wire(claims, md, "m2")
    lead = lead_wire.claim()
    assert (lead.task.role, lead.task.rank, lead.task.world_size) == ("lead", 0, 2)
    assert not join_wire.claim(wait=1).HasField("task")
    lead_wire.report(lead, task_pb2.TaskEvent(seq=1, type="coordinator", addr="127.0.0.1:29511"))
    join = join_wire.claim()
    assert (join.task.role, join.task.coordinator, join.task.rank) == ("join", "127.0.0.1:29511", 1)


def test_another_orgs_executor_can_neither_claim_nor_report(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    creator(resources={"machines": ["gpu-1"]})
    ours = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    theirs = Wire(claims, key(store, "globex", "executor"), "gpu-1")
    assert not theirs.claim(wait=1).HasField("task")
    claimed = ours.claim()
    assert theirs.refused(claimed, status(1, "running")) == "NOT_FOUND"


def test_only_the_platform_claims_unplaced_jobs_and_each_claim_is_audited(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(org="globex")
    member = Wire(claims, key(store, "acme", "executor"), "local", platform=True)
    with pytest.raises(grpc.RpcError) as caught:
        member.claim(wait=1)
    assert reason_of(caught.value) == "PERMISSION_DENIED"
    platform = Wire(claims, key(store, "platform", "platform"), "local", platform=True)
    claimed = platform.claim()
    assert claimed.org == "globex" and claimed.job.id == job.id
    with store.unit(write=False) as session:
        trail = session.scalars(
            sa.select(audit.AuditEvent).where(audit.AuditEvent.name == "training.claim.platform")
        ).all()
        assert [(t.org, t.subject) for t in trail] == [("globex", claimed.task.id)]
    ack = platform.report(claimed, status(1, "running"))  # the platform reports on it
    assert ack.status == "running"


def test_a_cancel_reaches_the_executor_and_its_result_ends_the_job(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    wire.report(claimed, status(1, "running"), metric(2, 1, 2.0))
    assert creator.cancel(job.id).status == "cancelling"
    assert wire.report(claimed).cancel is True  # a heartbeat learns it
    done = wire.report(
        claimed, task_pb2.TaskEvent(seq=3, type="result", result=task_pb2.TaskResult(step=1))
    )
    assert done.status == "cancelled"
    late = wire.report(
        claimed, metric(4, 2, 1.0)
    )  # after the end: nothing recorded, the status answered
    assert late.status == "cancelled" and late.seq == 3


def test_the_metrics_read_is_the_curve_the_job_trained_after_a_retry_starts_over(
    creator, claims: ServiceThread, jobs: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """Attempt 1 trains steps 1-3 and is cancelled; a retry that starts over trains from
    step 1 again. The read answers one point a step, the retry's, never both attempts'."""
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    first = wire.claim()
    wire.report(
        first, status(1, "running"), metric(2, 1, 3.0), metric(3, 2, 2.9), metric(4, 3, 2.8)
    )
    creator.cancel(job.id)
    ended = task_pb2.TaskEvent(seq=5, type="result", result=task_pb2.TaskResult(step=3))
    assert wire.report(first, ended).status == "cancelled"

    stub = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    md = key(store, "acme", "member")

    def curve() -> list[tuple[int, float]]:
        answer = stub.ListJobMetrics(
            job_service_pb2.ListJobMetricsRequest(id=job.id, names=["loss"]),
            metadata=md,
            timeout=30,
        )
        return [(p.step, p.value) for s in answer.series for p in s.points]

    assert curve() == [(1, 3.0), (2, 2.9), (3, 2.8)]
    retry = job_service_pb2.RetryJobRequest(id=job.id, idempotency_key="again")
    assert stub.RetryJob(retry, metadata=md, timeout=30).attempt.attempt_number == 2
    # Until the retry reports, the job's curve is still the one it trained.
    assert curve() == [(1, 3.0), (2, 2.9), (3, 2.8)]
    second = eventually(
        lambda: wire.claim(wait=2), lambda c: bool(c.task.id), "the retry offered", timeout=30
    )
    assert second.task.resume_step == 0
    wire.report(second, status(1, "running"), metric(2, 1, 3.1), metric(3, 2, 2.7))
    assert curve() == [(1, 3.1), (2, 2.7)]


def test_a_report_holds_at_most_500_events_and_cuts_log_lines(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    too_many = [metric(n, n, 1.0) for n in range(1, 502)]
    assert wire.refused(claimed, *too_many) == "INVALID_REQUEST"
    wire.report(claimed, task_pb2.TaskEvent(seq=1, type="log", line="é" * 5000))
    with store.unit(write=False) as session:
        (line,) = session.scalars(
            sa.select(tables.EventRow.data).where(tables.EventRow.type == "log")
        ).all()
    assert len(line["line"].encode()) <= 4096
    assert job.id


def test_the_expiry_sweep_is_idempotent_across_replicas(
    creator, store: Store, claims_config: Config
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    # The served claims sweep on their own clock; with an hour's lease they never see it
    # lapse, so only the replicas below, whose clock is past the lease, can expire it.
    held = dataclasses.replace(claims_config, lease_ttl_seconds=3600)
    served = ServiceThread(lambda: build_claims(held, store=store, port=0))
    try:
        wire = Wire(served, key(store, "acme", "executor"), "gpu-1")
        wire.report(wire.claim(), status(1, "running"))
    finally:
        served.stop()
    later = utcnow() + dt.timedelta(hours=2)
    replicas = [ClaimService(store, held, clock=lambda: later) for _ in range(3)]
    together = threading.Barrier(len(replicas))
    swept: list[int] = []

    def sweep(replica: ClaimService) -> None:
        together.wait(10)
        swept.append(replica.expire_leases())

    threads = [threading.Thread(target=sweep, args=(r,)) for r in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(swept) == [0, 0, 1]
    with store.unit(write=False) as session:
        failed = session.scalars(
            sa.select(tables.EventRow).where(
                tables.EventRow.job_id == job.id, tables.EventRow.type == "transition"
            )
        ).all()
        assert [e.data["status"] for e in failed].count("failed") == 1


def test_the_stream_assigns_acks_and_resumes_after_a_reconnect(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    md = key(store, "acme", "executor")
    stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
    hello = claim_service_pb2.Hello(
        machine="gpu-1", bases=["fixture-tiny-llm"], devices=["cpu"], supports=SUPPORTS
    )

    def stream(
        first: claim_service_pb2.Hello,
        then: list[claim_service_pb2.ConnectRequest],
        gate: threading.Event,
    ):  # type: ignore[no-untyped-def]
        def requests():  # type: ignore[no-untyped-def]
            yield claim_service_pb2.ConnectRequest(hello=first)
            gate.wait(10)
            yield from then

        return stub.Connect(requests(), metadata=md)

    gate = threading.Event()
    call = stream(hello, [], gate)
    welcome = next(call)
    assert welcome.welcome.executor_id.startswith("exe_")
    assignment = next(call).assignment
    assert assignment.job.id == job.id
    call.cancel()  # the stream breaks; the lease does not

    held = claim_service_pb2.HeldLease(task=assignment.task.id, lease=assignment.task.lease)
    resume = claim_service_pb2.Hello(**{**_fields(hello), "leases": [held]})
    report = claim_service_pb2.ConnectRequest(
        report=claim_service_pb2.StreamReport(
            task=assignment.task.id, lease=assignment.task.lease, events=[status(1, "running")]
        )
    )
    gate2 = threading.Event()
    call = stream(resume, [report], gate2)
    assert list(next(call).welcome.resumed) == [assignment.task.id]
    gate2.set()
    ack = next(m for m in call if m.WhichOneof("kind") == "ack").ack
    assert (ack.seq, ack.status, ack.reason) == (1, "running", "")
    call.cancel()


def test_reports_sent_without_waiting_are_each_acked_and_applied_once(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """An executor sends its reports without waiting for acks; those that wait while one is
    applied are committed together, and still each is answered on its own, in order: one
    that is not valid is refused alone, a resent one applies nothing again."""
    job = creator(resources={"machines": ["gpu-1"]})
    md = key(store, "acme", "executor")
    stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
    hello = claim_service_pb2.Hello(
        machine="gpu-1", bases=["fixture-tiny-llm"], devices=["cpu"], supports=SUPPORTS
    )
    assigned, done = threading.Event(), threading.Event()
    task: list[task_pb2.Task] = []

    def report(*events: task_pb2.TaskEvent) -> claim_service_pb2.ConnectRequest:
        (held,) = task
        return claim_service_pb2.ConnectRequest(
            report=claim_service_pb2.StreamReport(task=held.id, lease=held.lease, events=events)
        )

    def requests():  # type: ignore[no-untyped-def]
        yield claim_service_pb2.ConnectRequest(hello=hello)
        assigned.wait(30)
        yield report(status(1, "accepted"), status(2, "running"))
        for first in range(3, 203, 20):
            yield report(*(metric(seq, seq, 1.0 / seq) for seq in range(first, first + 20)))
            if first == 103:  # numbered and unnumbered together: refused
                yield report(metric(300, 300, 0.5), task_pb2.TaskEvent(type="log", line="x"))
        yield report(*(metric(seq, seq, 9.0) for seq in range(183, 203)))  # resent
        yield report(*(metric(seq, seq, 2.0) for seq in range(210, 213)))
        # Numbered below what the report before applied: a replay, as if one by one.
        yield report(*(metric(seq, seq, 3.0) for seq in range(205, 208)))
        done.wait(30)

    call = stub.Connect(requests(), metadata=md, timeout=60)
    assert next(call).WhichOneof("kind") == "welcome"
    task.append(next(call).assignment.task)
    assigned.set()
    acks = [next(m for m in call if m.WhichOneof("kind") == "ack").ack for _ in range(15)]
    done.set()
    call.cancel()
    assert [a.reason for a in acks] == [""] * 7 + ["INVALID_REQUEST"] + [""] * 7
    seqs = [a.seq for a in acks if not a.reason]
    assert seqs == sorted(seqs) and seqs[-1] == 212
    with store.unit(write=False) as session:
        points = session.execute(
            sa.select(tables.MetricRow.step, tables.MetricRow.value)
            .where(tables.MetricRow.job_id == job.id)
            .order_by(tables.MetricRow.step)
        ).all()
        events = session.scalar(
            sa.select(sa.func.count())
            .select_from(tables.EventRow)
            .where(tables.EventRow.job_id == job.id, tables.EventRow.type == "metric")
        )
    expected = [(seq, 1.0 / seq) for seq in range(3, 203)] + [(s, 2.0) for s in range(210, 213)]
    assert [tuple(p) for p in points] == expected
    assert events == 203


def test_a_task_leased_as_its_stream_ended_is_given_back_at_once(
    creator, claims_config: Config, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """A claim that commits as the executor's stream ends is never delivered: the stream's
    end gives its task back, open for the next claim, rather than held until its lease
    lapses; a task the stream delivered stays the executor's."""
    creator(resources={"machines": ["gpu-1"]})
    service = ClaimService(store, claims_config)
    executor = Principal(key_id="key_exe", org="acme", role="executor")
    offer = Offer.parse("gpu-1", False, ["fixture-tiny-llm"], ["cpu"], SUPPORTS)

    def connected() -> str:
        return service.hello(executor, offer, [])[0]

    gone = connected()
    first = eventually(
        lambda: service.claim(executor, offer, gone), lambda f: f is not None, "a claim"
    )
    service.goodbye(gone, delivered=set())
    kept = connected()
    again = service.claim(executor, offer, kept)
    assert again is not None and again.task.id == first.task.id
    assert again.task.lease != first.task.lease
    service.goodbye(kept, delivered={again.task.id})
    assert service.claim(executor, offer, connected()) is None


def test_a_task_whose_assignment_was_lost_on_the_way_is_given_back_at_the_reconnect(
    creator, claims_config: Config, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """A stream that broke as it wrote an assignment keeps its lease (the executor may
    have got it). Reconnecting, the executor names its last session: a task leased there
    that it does not name is given back at once, one it names goes on; another key's
    session named ends nothing."""
    creator(resources={"machines": ["gpu-1"]})
    service = ClaimService(store, claims_config)
    executor = Principal(key_id="key_exe", org="acme", role="executor")
    offer = Offer.parse("gpu-1", False, ["fixture-tiny-llm"], ["cpu"], SUPPORTS)

    first = service.hello(executor, offer, [])[0]
    lost = eventually(
        lambda: service.claim(executor, offer, first), lambda f: f is not None, "a claim"
    )
    service.goodbye(first, delivered={lost.task.id})  # written as the stream broke

    stranger = Principal(key_id="key_other", org="acme", role="executor")
    service.hello(stranger, offer, [], previous=first)
    assert service.claim(executor, offer, service.hello(executor, offer, [])[0]) is None

    second = service.hello(executor, offer, [], previous=first)[0]
    again = service.claim(executor, offer, second)
    assert again is not None and again.task.id == lost.task.id
    service.goodbye(second, delivered={again.task.id})
    held = [(again.task.id, again.task.lease)]
    third, resumed, _, _ = service.hello(executor, offer, held, previous=second)
    assert resumed == [again.task.id]
    assert service.claim(executor, offer, third) is None


def test_a_stream_closed_at_a_message_it_writes_ends_its_session_at_once(
    creator, claims_config: Config, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """gRPC closes a stream the executor reset at the message it is writing: the session
    ends with the call, the executor gone before the close returns, not left claiming
    tasks for a stream nobody reads until the collector finds it. The assignment it was
    writing may have reached the executor (nothing here can tell): its lease stands, for
    the executor to resume, rather than being given back under it."""
    creator(resources={"machines": ["gpu-1"]})
    servicer = ClaimServicer(ClaimService(store, claims_config), poll_seconds=0.05)
    hello = claim_service_pb2.Hello(
        machine="gpu-1", bases=["fixture-tiny-llm"], devices=["cpu"], supports=SUPPORTS, slots=2
    )

    async def requests():  # type: ignore[no-untyped-def]
        yield claim_service_pb2.ConnectRequest(hello=hello)
        await asyncio.Event().wait()  # the executor sends nothing more

    def connected() -> list[bool]:
        with store.unit(write=False) as session:
            return list(session.scalars(sa.select(ExecutorRow.connected)))

    def tasks() -> list[str]:
        with store.unit(write=False) as session:
            return list(session.scalars(sa.select(tables.TaskRow.status)))

    async def reset_at_the_assignment() -> list[bool]:
        context.principal_var.set(Principal(key_id="key_exe", org="acme", role="executor"))
        stream = servicer.Connect(requests(), None)  # type: ignore[arg-type]
        assert (await anext(stream)).WhichOneof("kind") == "welcome"
        assert (await anext(stream)).WhichOneof("kind") == "assignment"
        assert connected() == [True]
        await stream.aclose()
        return connected()

    assert asyncio.run(reset_at_the_assignment()) == [False]
    assert tasks() == ["leased"]


def test_the_executor_says_when_it_connects_and_when_it_reconnects(
    claims_config: Config,
    store: Store,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each welcome is logged; the hello after a break names the session before it."""
    with store.unit() as session:
        secret = auth.create_key(session, org="acme", role="executor")[1]
    previous: list[str] = []
    hello = ClaimService.hello

    def named(self, *args, **kw):  # type: ignore[no-untyped-def]
        previous.append(args[4] if len(args) > 4 else kw.get("previous", ""))
        return hello(self, *args, **kw)

    monkeypatch.setattr(ClaimService, "hello", named)
    served = ServiceThread(lambda: build_claims(claims_config, store=store, port=0))
    port = served.service.port
    url = f"http://127.0.0.1:{port}"
    config = AgentConfig(url=url, api_key=secret, machine="gpu-1", warm=False, work_root=tmp_path)
    agent = Agent(config)
    caplog.set_level(logging.INFO, logger="executor.agent")
    running = threading.Thread(target=agent.run, daemon=True)
    running.start()

    def welcomes() -> list[str]:
        return [r.getMessage() for r in caplog.records if " as executor exe_" in r.getMessage()]

    try:
        (first,) = eventually(welcomes, lambda found: len(found) == 1, "the first welcome")
        assert first.startswith(f"connected to {url} as executor exe_")
        assert "(machine gpu-1); 0 tasks resumed, 0 lost" in first
        served.stop()  # the stream breaks; the service comes back where it was
        served = ServiceThread(lambda: build_claims(claims_config, store=store, port=port))
        found = eventually(welcomes, lambda found: len(found) == 2, "a second welcome")
        assert found[1].startswith(f"reconnected to {url} as executor exe_")
        assert previous == ["", first.split(" as executor ")[1].split()[0]]
    finally:
        agent.stop(drain_seconds=0)
        running.join(10)
        served.stop()


def test_a_stream_learns_of_its_work_and_its_cancels_by_wake_ups_not_polls(
    creator, config: Config, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """With no poll to fall back on, a task opened for the machine and a cancel of its job
    each reach the executor's stream at once."""
    claims = ServiceThread(lambda: build_claims(config, store=store, port=0, poll_seconds=3600))
    try:
        stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
        hello = claim_service_pb2.Hello(
            machine="gpu-1", bases=["fixture-tiny-llm"], devices=["cpu"], supports=SUPPORTS
        )
        done = threading.Event()

        def requests():  # type: ignore[no-untyped-def]
            yield claim_service_pb2.ConnectRequest(hello=hello)
            done.wait(60)

        call = stub.Connect(requests(), metadata=key(store, "acme", "executor"), timeout=60)
        assert next(call).WhichOneof("kind") == "welcome"
        job = creator(resources={"machines": ["gpu-1"]})
        assignment = next(call).assignment
        assert assignment.job.id == job.id
        creator.cancel(job.id)
        cancel = next(call).cancel
        assert (cancel.task, cancel.reason) == (assignment.task.id, "cancelling")
        done.set()
        call.cancel()
    finally:
        claims.stop()


def test_an_announcement_on_the_open_stream_makes_the_new_base_claimable_at_once(
    creator, config: Config, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """An executor whose models directory gained a base says so on its stream; a job of
    that base waiting for its machine is assigned on the same stream, with no poll and no
    reconnect."""
    claims = ServiceThread(lambda: build_claims(config, store=store, port=0, poll_seconds=3600))
    try:
        stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
        hello = claim_service_pb2.Hello(
            machine="gpu-1", bases=["placed-base"], devices=["cpu"], supports=SUPPORTS
        )
        announced = threading.Event()
        done = threading.Event()

        def requests():  # type: ignore[no-untyped-def]
            yield claim_service_pb2.ConnectRequest(hello=hello)
            announced.wait(60)
            bases = ["placed-base", "fixture-tiny-llm"]
            yield claim_service_pb2.ConnectRequest(
                announcement=claim_service_pb2.Announcement(bases=bases)
            )
            done.wait(60)

        call = stub.Connect(requests(), metadata=key(store, "acme", "executor"), timeout=60)
        assert next(call).WhichOneof("kind") == "welcome"
        job = creator(resources={"machines": ["gpu-1"]})
        announced.set()
        assert next(call).assignment.job.id == job.id
        done.set()
        call.cancel()
    finally:
        claims.stop()


def test_the_tasks_an_executors_earlier_process_abandoned_are_lost_at_its_hello(
    creator, config: Config, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """A hello naming a task its machine's earlier process held ends that task's job
    `executor_lost` at once; a stale or wrong lease named so changes nothing. (The
    deployment's lease: none lapses while the test runs.)"""
    claims = ServiceThread(lambda: build_claims(config, store=store, port=0))
    try:
        abandoned_at_hello(creator, claims, store)
    finally:
        claims.stop()


def abandoned_at_hello(creator, claims: ServiceThread, store: Store) -> None:  # type: ignore[no-untyped-def]
    md = key(store, "acme", "executor")
    wire = Wire(claims, md, "gpu-1")
    held, kept = (
        creator(resources={"machines": ["gpu-1"]}),
        creator(resources={"machines": ["gpu-1"]}),
    )
    first, second = wire.claim(), wire.claim()
    assert {first.task.job, second.task.job} == {held.id, kept.id}
    for claimed in (first, second):
        wire.report(claimed, status(1, "accepted"), status(2, "running"))
    abandoned = [
        claim_service_pb2.HeldLease(task=first.task.id, lease=first.task.lease),
        claim_service_pb2.HeldLease(task=second.task.id, lease="not-its-lease"),
    ]
    hello = claim_service_pb2.Hello(
        machine="gpu-1", bases=["fixture-tiny-llm"], devices=["cpu"], supports=SUPPORTS,
        abandoned=abandoned,
    )  # fmt: skip
    stub = claim_service_pb2_grpc.ClaimServiceStub(grpc.insecure_channel(claims.target))
    done = threading.Event()

    def requests():  # type: ignore[no-untyped-def]
        yield claim_service_pb2.ConnectRequest(hello=hello)
        done.wait(30)

    call = stub.Connect(requests(), metadata=md, timeout=30)
    try:
        assert next(call).WhichOneof("kind") == "welcome"
        lost = creator.get(first.task.job)
        assert (lost.status, lost.failure_code) == ("failed", "executor_lost")
        assert creator.get(second.task.job).status == "running"
    finally:
        done.set()
        call.cancel()


def _fields(message: claim_service_pb2.Hello) -> dict:  # type: ignore[type-arg]
    return {f.name: v for f, v in message.ListFields()}


@pytest.fixture
def claims_without_store(config: Config, store: Store) -> Iterator[ServiceThread]:
    """ClaimService whose way to ArtifactService leads nowhere (the gateway or the
    service is down), under a 6-second lease and the default report interval."""
    with store.unit() as session:
        service_key = auth.create_key(session, org="platform", role="platform")[1]
    down = f"http://127.0.0.1:{free_port()}"
    wired = dataclasses.replace(
        config, lease_ttl_seconds=6, service_key=service_key, gateway_url=down
    )
    served = ServiceThread(lambda: build_claims(wired, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


def test_a_report_that_cannot_be_applied_yet_keeps_the_lease(
    creator, claims_without_store: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(claims_without_store, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    # The report interval follows the lease: at most a third of it, not the 20 s default.
    assert claimed.task.report == 2

    def expiry() -> object:
        with store.unit(write=False) as session:
            return session.get(tables.TaskRow, claimed.task.id).lease_expires  # type: ignore[union-attr]

    before = expiry()
    time.sleep(0.2)
    output = task_pb2.TaskEvent(seq=1, type="artifact", sha256="a" * 64)
    assert wire.refused(claimed, output) == "UNAVAILABLE"
    assert expiry() > before  # type: ignore[operator]
    # Nothing was applied: the executor sends the same events again later.
    assert wire.report(claimed).seq == 0
    assert creator.get(job.id).status == "preparing"


def test_a_protected_job_is_offered_only_to_an_executor_that_declares_its_protection(
    creator, claims: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    """HIP-1333 §5: a job is offered only where its protections are in `supports`."""
    creator(
        base_model="fixture-tiny-decider",
        dataset={"uri": "fixture:decisions-tiny-v1"},
        protect={"suites": ["sentiment"], "projection": {"strength": 1}, "distillation": True},
        resources={"machines": ["gpu-1"]},
    )
    wire = Wire(claims, key(store, "acme", "executor"), "gpu-1")

    def claim(protect: list[str]) -> claim_service_pb2.ClaimTaskResponse:
        supports = task_pb2.Supports(
            adaptations=["full", "readout"], outputs=["capability"], protect=protect
        )
        request = claim_service_pb2.ClaimTaskRequest(
            machine="gpu-1", bases=["fixture-tiny-decider"], devices=["cpu"],
            supports=supports, wait=1,
        )  # fmt: skip
        return wire.stub.ClaimTask(request, metadata=wire.md, timeout=60)

    assert not claim([]).HasField("task")
    assert not claim(["projection"]).HasField("task")
    assert claim(["projection", "distillation"]).task.role == "lead"


@pytest.fixture
def capped_claims(claims_config: Config, store: Store) -> Iterator[ServiceThread]:
    """ClaimService keeping at most 30 events a job (100,000 by default)."""
    capped = dataclasses.replace(claims_config, max_job_events=30)
    served = ServiceThread(lambda: build_claims(capped, store=store, port=0))
    try:
        yield served
    finally:
        served.stop()


def test_a_job_keeps_at_most_its_cap_of_log_and_metric_events(
    creator, capped_claims: ServiceThread, jobs: ServiceThread, store: Store
) -> None:  # type: ignore[no-untyped-def]
    # HIP-1333 §12: a job keeps at most its cap of events; past it a log line or a metric
    # point is dropped (from its series as from its events), while statuses are kept and
    # the job's progress still moves.
    job = creator(resources={"machines": ["gpu-1"]})
    wire = Wire(capped_claims, key(store, "acme", "executor"), "gpu-1")
    claimed = wire.claim()
    wire.report(claimed, status(1, "accepted"), status(2, "running"))
    seq = iter(range(3, 1000))
    wire.report(claimed, *[metric(next(seq), step, 2.0) for step in range(1, 13)])
    lines = [task_pb2.TaskEvent(seq=next(seq), type="log", line=f"line {n}") for n in range(4)]
    wire.report(claimed, *lines, *[metric(next(seq), step, 1.0) for step in range(13, 30)])
    wire.report(claimed, task_pb2.TaskEvent(seq=next(seq), type="log", line="late"))
    wire.report(claimed, status(next(seq), "finalizing"))

    reads = job_service_pb2_grpc.JobServiceStub(grpc.insecure_channel(jobs.target))
    md = key(store, "acme", "member")
    events = reads.ListJobEvents(
        job_service_pb2.ListJobEventsRequest(id=job.id, page_size=1000), metadata=md, timeout=30
    ).events
    kept = [e for e in events if e.type in ("log", "metric")]
    assert max(e.seq for e in kept) == 30  # the record filled to its cap, never past it
    assert [e.line for e in kept if e.type == "log"] == ["line 0", "line 1", "line 2", "line 3"]
    assert events[-1].seq > 30 and events[-1].status == "finalizing"
    (loss,) = reads.ListJobMetrics(
        job_service_pb2.ListJobMetricsRequest(id=job.id), metadata=md, timeout=30
    ).series
    steps = [e.step for e in kept if e.type == "metric"]
    assert [p.step for p in loss.points] == steps == list(range(1, 20))
    assert creator.get(job.id).progress.step == 29
