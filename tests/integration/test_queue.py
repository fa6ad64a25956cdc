"""A waiting job's `queue` as JobService answers it over gRPC, on SQLite and PostgreSQL:
its place among the tasks the same executors could take (every org's counted, none
named), and when it should start, from the executors ClaimService keeps and the running
task's progress."""

from __future__ import annotations

import json

from google.protobuf import json_format

from services.claims.store import ExecutorRow
from services.core import ids
from services.core.offers import Offer
from services.core.store import Store, utcnow
from services.core.tables import JobRow, TaskRow
from tests.integration.test_jobs import Api, acme, globex, prepared
from trainyard.claim.v1 import task_pb2
from trainyard.job.v1 import job_service_pb2

__all__ = ["acme", "globex"]  # the fixtures, used by name

SPEC = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "hyperparameters": {"max_steps": 20},
}
SUPPORTS = task_pb2.Supports(adaptations=["full", "lora"], outputs=["checkpoint", "lora"])


def executor(
    store: Store, org: str, machine: str, *, platform: bool = False, slots: int = 1
) -> str:
    """An executor ClaimService registered and holds connected, as its hello leaves it."""
    offer = Offer.parse(machine, platform, ["fixture-tiny-llm"], ["cpu"], SUPPORTS, 0, slots)
    now = utcnow()
    with store.unit() as session:
        row = ExecutorRow(
            id=ids.new_id("exe"), org=org, key_id="key", machine=machine, platform=platform,
            offer=offer.to_json(), connected=True, create_time=now, last_seen=now,
        )  # fmt: skip
        session.add(row)
        return row.id


def lease(store: Store, job_id: str, executor_id: str, *, step: int) -> None:
    """The job's lead claimed by the executor and trained `step` steps at 0.5 s a step, as
    ClaimService's claim and reports leave its rows."""
    now = utcnow()
    with store.unit() as session:
        job = session.get(JobRow, job_id)
        assert job is not None
        task = session.query(TaskRow).filter_by(job_id=job_id, position=0).one()
        task.status, task.executor_id = "leased", executor_id
        task.claim_time = task.report_time = now
        job.status, job.running_time = "running", now
        planned = job.planned().planned_steps
        job.progress = {
            "step": step,
            "planned_steps": planned,
            "eta_seconds": 0.5 * (planned - step),
        }


def test_a_queue_counts_the_tasks_its_executors_take_and_simulates_their_slots(
    acme: Api, globex: Api, store: Store
) -> None:
    on_m1 = {**SPEC, "resources": {"machines": ["m1"]}}
    first = acme.wait_for(acme.create(on_m1).id, prepared)
    # No executor serves `m1`: its place, but no estimate.
    queue = first.queue
    assert (queue.position, queue.ahead, queue.total, queue.basis) == (1, 0, 1, "no_executor")
    assert not first.queue.HasField("eta_seconds")

    box = executor(store, "acme", "m1")
    alone = acme.get(first.id).queue
    # A free slot and nothing ahead: it starts at once, nothing guessed.
    assert (alone.position, alone.eta_seconds, alone.basis) == (1, 0.0, "measured")
    second = acme.wait_for(acme.create(on_m1).id, prepared)
    behind = second.queue
    # The first job ahead runs as the fixture base's profile says: 30 s to load and save,
    # 5 s after its loop, 20 steps of 0.5 s at its 256 tokens.
    assert (behind.position, behind.ahead, behind.total, behind.basis) == (2, 1, 2, "profile")
    assert second.hyperparameters.max_seq_length == 256
    assert behind.eta_seconds == 35.0 + 20 * 0.5

    # The first job is claimed and trains: the second is next, behind its 10 steps left.
    lease(store, first.id, box, step=10)
    now_first = acme.get(first.id)
    assert now_first.status == "running" and not now_first.HasField("queue")
    next_up = acme.get(second.id).queue
    assert (next_up.position, next_up.ahead, next_up.total, next_up.basis) == (1, 0, 1, "measured")
    assert 9.0 <= next_up.eta_seconds <= 10.0 + 5.0  # 10 steps × 0.5 s, then 5 s after its loop
    listed = acme.call("ListJobs", job_service_pb2.ListJobsRequest()).jobs
    assert {j.id: j.HasField("queue") for j in listed} == {first.id: False, second.id: True}


def test_a_platform_queue_counts_every_orgs_tasks_and_names_none_of_theirs(
    acme: Api, globex: Api, store: Store
) -> None:
    platform = {**SPEC, "resources": {"budget": 100}}
    theirs = globex.wait_for(globex.create(platform).id, prepared)
    mine = acme.wait_for(acme.create(platform).id, prepared)
    executor(store, "platform", "local", platform=True, slots=2)
    queue = acme.get(mine.id).queue
    # Two slots free: the other org's job takes one, this one the other, at once.
    assert (queue.position, queue.ahead, queue.total, queue.eta_seconds) == (2, 1, 2, 0.0)
    read = json.dumps(
        json_format.MessageToDict(acme.get(mine.id), preserving_proto_field_name=True)
    )
    assert theirs.id not in read and "globex" not in read
    assert globex.get(theirs.id).queue.position == 1
