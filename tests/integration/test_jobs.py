"""JobService over real gRPC, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import dataclasses
import functools
import io
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
import sqlalchemy as sa
from google.protobuf import json_format, struct_pb2
from grpc_status import rpc_status

from services.core import audit, lifecycle, object_tables, tables
from services.core.auth import Principal
from services.core.config import Config
from services.core.pagetoken import PageTokens
from services.core.store import Store
from services.jobs.server import build_server, use_cases
from services.jobs.service import JobService
from tests.support import ServiceThread
from trainyard.job.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc
from trainyard.training.catalog import Catalog

FIXTURE = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}


def reason_of(exc: grpc.RpcError) -> str:
    from google.rpc import error_details_pb2

    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return info.reason


def info_of(exc: grpc.RpcError) -> dict[str, str]:
    """The ErrorInfo metadata of a refusal: the field at fault, the supported set."""
    from google.rpc import error_details_pb2

    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return dict(info.metadata)


class Api:
    def __init__(self, channel: grpc.Channel, key: str) -> None:
        self.stub = job_service_pb2_grpc.JobServiceStub(channel)
        self.md = [("authorization", f"Bearer {key}")]

    def create(self, body: dict, **kw) -> job_pb2.Job:  # type: ignore[no-untyped-def,type-arg]
        struct = struct_pb2.Struct()
        struct.update(body)
        return self.stub.CreateJob(
            job_service_pb2.CreateJobRequest(body=struct), metadata=self.md, timeout=30, **kw
        )

    def get(self, job_id: str, **kw) -> job_pb2.Job:  # type: ignore[no-untyped-def]
        return self.stub.GetJob(
            job_service_pb2.GetJobRequest(id=job_id, **kw), metadata=self.md, timeout=30
        )

    def call(self, name: str, request, **kw):  # type: ignore[no-untyped-def]
        return getattr(self.stub, name)(
            request, metadata=self.md + kw.pop("md", []), timeout=30, **kw
        )

    def refused(self, name: str, request) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(grpc.RpcError) as caught:
            self.call(name, request)
        return reason_of(caught.value)

    def refusal(self, name: str, request) -> tuple[str, dict[str, str]]:  # type: ignore[no-untyped-def]
        """The reason and ErrorInfo metadata of a refused call."""
        with pytest.raises(grpc.RpcError) as caught:
            self.call(name, request)
        return reason_of(caught.value), info_of(caught.value)

    def wait_for(self, job_id: str, predicate, timeout: float = 20.0) -> job_pb2.Job:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.get(job_id)
            if predicate(job):
                return job
            time.sleep(0.1)
        raise AssertionError(f"job never reached the state wanted: {job.status}")


@pytest.fixture
def acme(channel: grpc.Channel, keys: dict[str, str]) -> Api:
    return Api(channel, keys["acme"])


@pytest.fixture
def globex(channel: grpc.Channel, keys: dict[str, str]) -> Api:
    return Api(channel, keys["globex"])


def prepared(job: job_pb2.Job) -> bool:
    return job.preparation.status == "verified"


def test_a_fixture_job_is_planned_by_the_exact_formulas(acme: Api) -> None:
    job = acme.create(FIXTURE)
    assert job.status == "queued"
    assert job.id.startswith("job_") and job.number == 1
    # 160 selected → the 12 whose identities fall on the eval side held out, 148 to train;
    # batch 4 × 2 → ceil(148 / 8) = 19 steps an epoch, × 3.
    assert (job.train_examples, job.eval_examples) == (148, 12)
    assert (job.effective_batch_size, job.steps_per_epoch, job.planned_steps) == (8, 19, 57)
    assert job.hyperparameters.num_train_epochs == 3
    assert job.hyperparameters.learning_rate == pytest.approx(1e-3)
    assert not job.hyperparameters.HasField("max_steps")
    assert (job.adaptation.mode, job.output.kind, job.objective.loss_mask) == (
        "full",
        "checkpoint",
        "assistant_only",
    )
    assert (job.retention.policy_class, job.retention.ttl_seconds) == ("standard", 30 * 86400)


def test_max_steps_replaces_epochs_and_both_are_refused(acme: Api) -> None:
    job = acme.create({**FIXTURE, "hyperparameters": {"max_steps": 5}})
    assert job.planned_steps == 5 and not job.hyperparameters.HasField("num_train_epochs")
    both = {**FIXTURE, "hyperparameters": {"max_steps": 5, "num_train_epochs": 2}}
    with pytest.raises(grpc.RpcError) as caught:
        acme.create(both)
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert "hyperparameters.max_steps" in caught.value.details()  # type: ignore[attr-defined]


def test_preparation_freezes_a_snapshot_with_its_split(acme: Api) -> None:
    job = acme.wait_for(acme.create(FIXTURE).id, prepared)
    assert job.status == "preparing"
    assert (job.chat_count, job.message_count, len(job.chats), job.chats_truncated) == (
        160,
        320,
        50,
        True,
    )
    page = acme.call(
        "ListJobDatasetItems",
        job_service_pb2.ListJobDatasetItemsRequest(id=job.id, split="eval", limit=200),
    )
    assert page.total == 12 and len(page.items) == 12 and not page.has_more
    page = acme.call(
        "ListJobDatasetItems",
        job_service_pb2.ListJobDatasetItemsRequest(id=job.id, limit=25, offset=150),
    )
    assert (page.total, len(page.items), page.has_more) == (160, 10, False)
    found = acme.call(
        "ListJobDatasetItems",
        job_service_pb2.ListJobDatasetItemsRequest(id=job.id, search="REVERSE 1"),
    )
    assert (
        found.search_applied
        and not found.HasField("total")
        and {i.name for i in found.items} >= {"reverse 1"}
    )
    item = acme.call(
        "GetJobDatasetItem",
        job_service_pb2.GetJobDatasetItemRequest(id=job.id, item=found.items[0].id),
    )
    assert [m.role for m in item.messages] == ["user", "assistant"]


def test_every_job_on_unchanged_data_holds_out_the_same_examples(acme: Api) -> None:
    def eval_ids(job_id: str) -> set[str]:
        acme.wait_for(job_id, prepared)
        page = acme.call(
            "ListJobDatasetItems",
            job_service_pb2.ListJobDatasetItemsRequest(id=job_id, split="eval"),
        )
        return {i.id for i in page.items}

    first = acme.create(FIXTURE)
    second = acme.create({**FIXTURE, "hyperparameters": {"learning_rate": 0.01}})
    assert eval_ids(first.id) == eval_ids(second.id)


def test_the_same_key_and_shape_return_the_same_job(acme: Api) -> None:
    body = {**FIXTURE, "idempotency_key": "nightly-42"}
    first, again = acme.create(body), acme.create(body)
    assert first.id == again.id and first.number == again.number


def test_the_same_key_with_another_shape_is_refused(acme: Api) -> None:
    acme.create({**FIXTURE, "idempotency_key": "k-1"})
    with pytest.raises(grpc.RpcError) as caught:
        acme.create({**FIXTURE, "idempotency_key": "k-1", "hyperparameters": {"max_steps": 3}})
    assert reason_of(caught.value) == "IDEMPOTENCY_KEY_REUSED"


def test_twenty_racing_identical_creates_make_one_job(acme: Api) -> None:
    body = {**FIXTURE, "idempotency_key": "race-1"}
    ids: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(20)

    def create() -> None:
        try:
            start.wait()
            ids.append(acme.create(body).id)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=create) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(set(ids)) == 1
    listed = acme.call("ListJobs", job_service_pb2.ListJobsRequest())
    assert listed.total_size == 1


def test_racing_creates_each_take_the_next_number(acme: Api) -> None:
    """Each create counts and numbers under its org's lock (on PostgreSQL the lock and the
    read go to the server together): racing creates number 1, 2, 3… with none repeated."""
    numbers: list[int] = []
    failures = race(*[lambda: numbers.append(acme.create(FIXTURE).number)] * 12)
    assert failures == []
    assert sorted(numbers) == list(range(1, 13))


def test_a_job_reads_back_its_own_labels_beside_another_org_s_same_config(
    acme: Api, globex: Api
) -> None:
    """The labels (who asked, the key, the project) are outside the training config's hash:
    two jobs that train alike each read back their own, in whichever org."""
    same = {**FIXTURE, "output": {"name": "nightly"}}
    ours = acme.create({**same, "requested_by": "alice", "idempotency_key": "a-1"})
    theirs = globex.create(
        {**same, "requested_by": "bob", "idempotency_key": "b-1", "project": "bots"}
    )
    for api, job, asked, key, project in (
        (acme, ours, "alice", "a-1", "default"),
        (globex, theirs, "bob", "b-1", "bots"),
    ):
        read = api.get(job.id)
        assert (read.requested_by, read.idempotency_key, read.project) == (asked, key, project)


def test_keys_are_per_org(acme: Api, globex: Api) -> None:
    body = {**FIXTURE, "idempotency_key": "shared"}
    assert acme.create(body).id != globex.create(body).id


def test_numbers_count_per_project_and_find_the_job(acme: Api) -> None:
    a1, a2 = acme.create(FIXTURE), acme.create(FIXTURE)
    b1 = acme.create({**FIXTURE, "project": "support-bot"})
    assert (a1.number, a2.number, b1.number) == (1, 2, 1)
    assert acme.get("2", identifier="number").id == a2.id
    assert acme.get("1", identifier="number", project="support-bot").id == b1.id
    assert (
        acme.refused("GetJob", job_service_pb2.GetJobRequest(id="9", identifier="number"))
        == "NOT_FOUND"
    )


def test_another_orgs_job_answers_as_an_unknown_one(acme: Api, globex: Api) -> None:
    job = acme.create(FIXTURE)
    for name, request in [
        ("GetJob", job_service_pb2.GetJobRequest(id=job.id)),
        ("CancelJob", job_service_pb2.CancelJobRequest(id=job.id)),
        ("ListJobEvents", job_service_pb2.ListJobEventsRequest(id=job.id)),
        ("ListJobAttempts", job_service_pb2.ListJobAttemptsRequest(id=job.id)),
        ("GetJob", job_service_pb2.GetJobRequest(id="job_0000000000000000")),
    ]:
        assert globex.refused(name, request) == "NOT_FOUND"
    assert acme.get(job.id).status in ("queued", "preparing")


def test_cancel_from_queued_or_preparing_ends_at_once_and_repeats_as_a_no_op(acme: Api) -> None:
    job = acme.create(FIXTURE)
    cancelled = acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    assert cancelled.status == "cancelled" and not cancelled.model_available
    again = acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    assert again.status == "cancelled"
    (attempt,) = acme.call(
        "ListJobAttempts", job_service_pb2.ListJobAttemptsRequest(id=job.id)
    ).attempts
    assert attempt.status == "cancelled"


def move(store: Store, job_id: str, *states: str) -> None:
    """Move a job as an executor's reports would, through the lifecycle module."""
    with store.unit() as session:
        row = session.get(tables.JobRow, job_id)
        assert row is not None
        for state in states:
            lifecycle.move_job(session, row, state)


def test_cancel_while_running_asks_the_executor_and_finalizing_is_refused(
    acme: Api, store: Store
) -> None:
    running = acme.wait_for(acme.create(FIXTURE).id, prepared)
    move(store, running.id, "running")
    assert (
        acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=running.id)).status
        == "cancelling"
    )
    finalizing = acme.wait_for(acme.create(FIXTURE).id, prepared)
    move(store, finalizing.id, "running", "finalizing")
    assert (
        acme.refused("CancelJob", job_service_pb2.CancelJobRequest(id=finalizing.id))
        == "TRAINING_JOB_FINALIZING"
    )
    move(store, finalizing.id, "succeeded")
    assert (
        acme.refused("CancelJob", job_service_pb2.CancelJobRequest(id=finalizing.id))
        == "INVALID_TRANSITION"
    )
    with store.unit(write=False) as session:
        names = session.scalars(
            sa.select(audit.AuditEvent.code).where(
                audit.AuditEvent.name == "training.job.cancel.rejected"
            )
        ).all()
    assert sorted(names) == ["INVALID_TRANSITION", "TRAINING_JOB_FINALIZING"]


def test_retry_makes_a_new_attempt_once_per_key(acme: Api) -> None:
    job = acme.create(FIXTURE)
    acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    retry = job_service_pb2.RetryJobRequest(id=job.id)
    assert acme.refused("RetryJob", retry) == "INVALID_REQUEST"
    first = acme.call("RetryJob", retry, md=[("idempotency-key", "retry-1")])
    assert first.attempt.attempt_number == 2 and first.job.status == "queued"
    again = acme.call("RetryJob", retry, md=[("idempotency-key", "retry-1")])
    assert again.attempt.id == first.attempt.id
    job = acme.wait_for(job.id, lambda j: j.status == "preparing")
    assert job.attempt_count == 2 and job.planned_steps == 57
    assert acme.refused(
        "RetryJob", job_service_pb2.RetryJobRequest(id=job.id, idempotency_key="retry-2")
    ) == ("INVALID_TRANSITION")


def test_a_resume_needs_a_checkpoint(acme: Api) -> None:
    job = acme.create(FIXTURE)
    acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    request = job_service_pb2.RetryJobRequest(
        id=job.id, idempotency_key="r", resume_from_checkpoint=True
    )
    assert acme.refused("RetryJob", request) == "CHECKPOINT_UNAVAILABLE"


def test_events_record_each_transition_in_order_and_long_poll(acme: Api) -> None:
    job = acme.create(FIXTURE)
    acme.wait_for(job.id, prepared)
    acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    events = acme.call("ListJobEvents", job_service_pb2.ListJobEventsRequest(id=job.id)).events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    transitions = [(e.status, e.reason) for e in events if e.type == "transition"]
    assert transitions[0] == ("queued", "created") and transitions[-1] == (
        "cancelled",
        "cancel_requested",
    )
    last = events[-1].seq
    # The job ended and nothing more can come: a long poll answers at once, with the status.
    started = time.monotonic()
    ended = acme.call(
        "ListJobEvents", job_service_pb2.ListJobEventsRequest(id=job.id, after=last, wait=5)
    )
    assert (list(ended.events), ended.next_after, ended.status) == ([], last, "cancelled")
    assert time.monotonic() - started < 2
    # A job that has not ended holds the wait.
    live = acme.wait_for(acme.create(FIXTURE).id, prepared)
    after = acme.call("ListJobEvents", job_service_pb2.ListJobEventsRequest(id=live.id)).next_after
    started = time.monotonic()
    empty = acme.call(
        "ListJobEvents", job_service_pb2.ListJobEventsRequest(id=live.id, after=after, wait=1)
    )
    assert (
        list(empty.events) == [] and empty.next_after == after and time.monotonic() - started >= 0.9
    )


def test_a_long_poll_returns_when_an_event_arrives(acme: Api) -> None:
    job = acme.create(FIXTURE)
    acme.wait_for(job.id, prepared)
    seq = acme.call("ListJobEvents", job_service_pb2.ListJobEventsRequest(id=job.id)).next_after
    cancel = threading.Timer(
        0.5, lambda: acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    )
    cancel.start()
    answer = acme.call(
        "ListJobEvents", job_service_pb2.ListJobEventsRequest(id=job.id, after=seq, wait=20)
    )
    cancel.join()  # the cancel's own answer comes before the test's channel closes
    assert answer.events and answer.events[0].seq == seq + 1


def test_a_log_long_poll_holds_until_the_attempt_ends(acme: Api) -> None:
    live = acme.wait_for(acme.create(FIXTURE).id, prepared)
    started = time.monotonic()
    empty = acme.call(
        "GetAttemptLog", job_service_pb2.GetAttemptLogRequest(id=live.id, attempt="1", wait=1)
    )
    assert (empty.text, empty.complete) == ("", False)
    assert time.monotonic() - started >= 0.9
    acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=live.id))
    started = time.monotonic()
    ended = acme.call(
        "GetAttemptLog", job_service_pb2.GetAttemptLogRequest(id=live.id, attempt="1", wait=5)
    )
    assert (ended.text, ended.complete) == ("", True)
    assert time.monotonic() - started < 2


STATUSES = (
    "queued,preparing,running,evaluating,finalizing,cancelling,succeeded,rejected,failed,"
    "cancelled,stopped"
)


@pytest.mark.parametrize(
    ("method", "request_", "field", "supported"),
    [
        ("ListJobs", job_service_pb2.ListJobsRequest(status="SUCCEEDED"), "status", STATUSES),
        ("ListJobs", job_service_pb2.ListJobsRequest(status="done"), "status", STATUSES),
        (
            "GetJob",
            job_service_pb2.GetJobRequest(id="1", identifier="name"),
            "identifier",
            "id,number",
        ),
        (
            "ListJobDatasetItems",
            job_service_pb2.ListJobDatasetItemsRequest(id="job_0000000000000000", split="test"),
            "split",
            "all,train,eval",
        ),
    ],
)
def test_a_value_outside_a_closed_set_is_refused_with_the_set(
    acme: Api, method: str, request_: object, field: str, supported: str
) -> None:
    reason, info = acme.refusal(method, request_)
    assert (reason, info["field"], info["supported"]) == ("INVALID_REQUEST", field, supported)


def test_a_create_naming_an_unknown_field_names_it_and_what_its_object_takes(acme: Api) -> None:
    body = {**FIXTURE, "hyperparameters": {"max_steps": 5, "colour": "blue"}}
    with pytest.raises(grpc.RpcError) as caught:
        acme.create(body)
    info = info_of(caught.value)
    assert reason_of(caught.value) == "INVALID_REQUEST"
    assert caught.value.details() == "Field hyperparameters.colour is not a known field."  # type: ignore[attr-defined]
    assert info["field"] == "hyperparameters.colour" and "max_steps" in info["supported"]
    assert "blue" not in str(info)


def test_list_pages_newest_first_with_tokens_bound_to_filters(acme: Api, globex: Api) -> None:
    made = [acme.create(FIXTURE).id for _ in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page = acme.call("ListJobs", job_service_pb2.ListJobsRequest(page_size=2, page_token=token))
        assert page.total_size == 5
        seen += [j.id for j in page.jobs]
        token = page.next_page_token
        if not token:
            break
    assert seen == made[::-1]
    first = acme.call("ListJobs", job_service_pb2.ListJobsRequest(page_size=2))
    assert globex.refused(
        "ListJobs", job_service_pb2.ListJobsRequest(page_token=first.next_page_token)
    ) == ("INVALID_REQUEST")
    filtered = job_service_pb2.ListJobsRequest(page_token=first.next_page_token, status="queued")
    assert acme.refused("ListJobs", filtered) == "INVALID_REQUEST"
    assert (
        acme.refused("ListJobs", job_service_pb2.ListJobsRequest(page_token="garbage"))
        == "INVALID_REQUEST"
    )
    acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=made[0]))
    cancelled = acme.call("ListJobs", job_service_pb2.ListJobsRequest(status="cancelled"))
    assert [j.id for j in cancelled.jobs] == [made[0]] and cancelled.total_size == 1


@pytest.fixture
def tight(config: Config, store: Store) -> Iterator[grpc.Channel]:
    limited = dataclasses.replace(config, queue_limit=2, execution_limit_seconds=2000)
    served = ServiceThread(lambda: build_server(limited, store=store, port=0))
    try:
        with grpc.insecure_channel(served.target) as channel:
            yield channel
    finally:
        served.stop()


def test_the_queue_limit_and_duration_admission(tight: grpc.Channel, keys: dict[str, str]) -> None:
    api = Api(tight, keys["acme"])
    # 57 steps at 0.5 s + 30 s fixed = 58.5 s of workload, + 1,800 s tolerance: admitted.
    estimate = api.call(
        "EstimateJob",
        job_service_pb2.EstimateJobRequest(job=json_format.ParseDict(FIXTURE, job_pb2.Job())),
    )
    assert (
        estimate.admitted
        and estimate.duration_components.projected_active_seconds == pytest.approx(1858.5)
    )
    assert estimate.duration_components.execution_limit_seconds == 2000
    long_run = {**FIXTURE, "hyperparameters": {"num_train_epochs": 20}}  # 380 steps: 220 s + 1,800
    with pytest.raises(grpc.RpcError) as caught:
        api.create(long_run)
    assert reason_of(caught.value) == "TRAINING_DURATION_EXCEEDS_LIMIT"
    api.create(FIXTURE)
    api.create(FIXTURE)
    with pytest.raises(grpc.RpcError) as caught:
        api.create(FIXTURE)
    assert reason_of(caught.value) == "JOB_LIMIT"


def test_refusals_and_acceptances_are_on_the_audit_trail_without_bodies(
    acme: Api, store: Store
) -> None:
    job = acme.create({**FIXTURE, "requested_by": "auditor"})
    # Preparation moves it out of the queue on its own time; its move is audited then.
    acme.wait_for(job.id, lambda j: j.status != "queued")
    with pytest.raises(grpc.RpcError):
        acme.create(
            {
                **FIXTURE,
                "dataset": {"uri": "fixture:synthetic-tiny-v1", "tags": ["Qx7-no-such-tag"]},
            }
        )
    with store.unit(write=False) as session:
        rows = session.scalars(sa.select(audit.AuditEvent).order_by(audit.AuditEvent.id)).all()
        names = [(r.name, r.code) for r in rows]
        stored = repr([(r.details, r.subject, r.code) for r in rows])
    assert ("training.job.create.accepted", "") in names
    assert ("training.job.create.rejected", "TRAINING_DATASET_SELECTION_INVALID") in names
    assert any(name == "training.job.state.transitioned" for name, _ in names)
    assert "Qx7" not in stored


def test_timing_measures_the_phases_it_can(acme: Api) -> None:
    job = acme.wait_for(acme.create(FIXTURE).id, prepared)
    assert job.timing.attempt_count == 1 and job.timing.HasField("preparing_seconds")
    assert not job.timing.HasField("total_seconds")
    cancelled = acme.call("CancelJob", job_service_pb2.CancelJobRequest(id=job.id))
    assert cancelled.timing.total_seconds >= job.timing.preparing_seconds
    assert not cancelled.timing.HasField("training_seconds")


def race(*works: Callable[[], object]) -> list[BaseException]:
    """Run the works at the same moment, each on a thread; what each raised."""
    start = threading.Barrier(len(works))
    failures: list[BaseException] = []

    def run(work: Callable[[], object]) -> None:
        start.wait()
        try:
            work()
        except BaseException as exc:
            failures.append(exc)

    racers = [threading.Thread(target=run, args=(work,)) for work in works]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    return failures


def test_cancel_racing_preparation_always_answers(store: Store, config: Config) -> None:
    """Cancel and preparation both write the job's events: each takes the job's row lock
    first, so neither deadlocks the other (a deadlock once answered INTERNAL)."""
    service = use_cases(store, Catalog(), config, PageTokens(b"k" * 32))
    acme = Principal(key_id="key_0123456789abcdef", org="acme", role="member")
    for _ in range(200 if store.dialect == "postgresql" else 40):
        job, _ = service.creation.create(acme, FIXTURE, job_pb2.Job())
        cancel = functools.partial(service.control.cancel, acme, job.id)
        assert race(service.preparation.prepare_next, cancel) == []
        assert service.reads.get(acme, job.id).status == "cancelled"


# -- from: a LoRA job that starts from an adapter of the org --------------------------------


class _Objects:
    """The org's bytes as ArtifactService reads them back, by sha256."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, str], bytes] = {}

    def read(self, org: str, sha256: str) -> bytes:
        return self.data[(org, sha256)]

    def open(self, org: str, sha256: str) -> io.BytesIO:
        return io.BytesIO(self.data[(org, sha256)])


def _store_adapter(
    store: Store, objects: _Objects, org: str, *, kind: str = "lora", base: str = "fixture-tiny-llm",
    rank: int = 8, status: str = "stored",
) -> str:  # fmt: skip
    import hashlib
    import json
    import tempfile
    from pathlib import Path

    from services.core import ids
    from services.core.store import utcnow
    from trainyard import packing

    with tempfile.TemporaryDirectory() as tmp:
        config = {"r": rank, "lora_alpha": 32, "target_modules": ["v_proj", "q_proj"]}
        (Path(tmp) / "adapter_config.json").write_text(json.dumps(config))
        (Path(tmp) / "adapter_model.safetensors").write_bytes(ids.new_id("w").encode())
        data = packing.pack_bytes(Path(tmp))
    sha = hashlib.sha256(data).hexdigest()
    objects.data[(org, sha)] = data
    with store.unit() as session:
        session.add(
            object_tables.ObjectRow(
                org=org, sha256=sha, id=ids.new_id("obj"), size=len(data), kind=kind, name="a",
                status=status, meta={"client": "cli_0000000000000001", "step": "3", "base": base},
                create_time=utcnow(), stored_time=utcnow(),
            )
        )  # fmt: skip
    return sha


@pytest.fixture
def from_service(store: Store, config: Config) -> tuple[JobService, _Objects]:
    objects = _Objects()
    return use_cases(store, Catalog(), config, PageTokens(b"k" * 32), reader=objects), objects


ACME = Principal(key_id="key_0123456789abcdef", org="acme", role="member")


def test_a_job_from_an_adapter_takes_its_lora_and_holds_it_until_it_ends(
    store: Store, from_service: tuple[JobService, _Objects]
) -> None:
    from services.claims import leases

    service, objects = from_service
    sha = _store_adapter(store, objects, "acme")
    job, _ = service.creation.create(ACME, {**FIXTURE, "from": sha}, job_pb2.Job())
    assert getattr(job, "from") == sha
    ad = job.adaptation
    assert (ad.mode, ad.rank, ad.alpha, list(ad.targets)) == ("lora", 8, 32, ["q_proj", "v_proj"])
    # The job reads the adapter: in use (DELETE is 409 IN_USE, the sweep keeps it), and a
    # task of the job may read it under its lease.
    with store.unit(write=False) as session:
        assert object_tables.in_use(session, "acme", sha)
        assert not object_tables.in_use(session, "globex", sha)
        row = session.get(tables.JobRow, job.id)
        assert row is not None and sha in leases._inputs(session, row)
    service.control.cancel(ACME, job.id)
    with store.unit(write=False) as session:
        assert not object_tables.in_use(session, "acme", sha)


@pytest.mark.parametrize(
    ("case", "reason", "field"),
    [
        ("unknown", "INVALID_REQUEST", "from"),
        ("other org", "INVALID_REQUEST", "from"),
        ("a dataset", "INVALID_REQUEST", "from"),
        ("pending", "INVALID_REQUEST", "from"),
        ("another base", "INCOMPATIBLE_ADAPTERS", "base_model"),
        ("another rank", "INCOMPATIBLE_ADAPTERS", "adaptation.rank"),
        ("full", "INVALID_REQUEST", "from"),
        ("no dataset", "INVALID_REQUEST", "dataset.uri"),
    ],
)
def test_a_from_that_is_no_adapter_of_the_jobs_lora_is_refused(
    store: Store, from_service: tuple[JobService, _Objects], case: str, reason: str, field: str
) -> None:
    from services.core import errors

    service, objects = from_service
    body: dict[str, object] = {**FIXTURE}
    if case == "unknown":
        sha = "ab" * 32
    elif case == "other org":
        sha = _store_adapter(store, objects, "globex")
    elif case == "a dataset":
        sha = _store_adapter(store, objects, "acme", kind="dataset")
    elif case == "pending":
        sha = _store_adapter(store, objects, "acme", status="pending")
    elif case == "another base":
        sha = _store_adapter(store, objects, "acme", base="another-base")
    else:
        sha = _store_adapter(store, objects, "acme", rank=16 if case == "another rank" else 8)
    body["from"] = sha
    if case == "another rank":
        body["adaptation"] = {"rank": 8}
    if case == "full":
        body["adaptation"] = {"mode": "full"}
    if case == "no dataset":
        del body["dataset"]
    with pytest.raises(errors.DomainError) as caught:
        service.creation.create(ACME, body, job_pb2.Job())
    assert (caught.value.reason, caught.value.metadata.get("field")) == (reason, field)
    assert sha not in str(caught.value) and sha not in str(caught.value.metadata)
