"""Webhooks on real rows, on SQLite and PostgreSQL, with a real receiver on 127.0.0.1: the
outbox written in the transaction that raises an event (and never by one that rolls back),
the worker's claims, attempts, retries and give-up, the guard at delivery, thresholds
crossed by the money module's own metering, the stalled and expiring scans, and the
service's bounds, pages and tenancy."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from google.protobuf import json_format
from standardwebhooks.webhooks import Webhook

from services.core import errors, ids, keys
from services.core.auth import Principal
from services.core.config import Config
from services.core.lifecycle.moves import failure_of, move_job
from services.core.money import ledger, windows
from services.core.money.tables import HoldRow, SpendCapRow
from services.core.object_tables import ObjectRow, PublicationRow
from services.core.pagetoken import PageTokens
from services.core.states import JobStatus
from services.core.store import Store, utcnow
from services.core.tables import JobRow
from services.core.webhooks import DeliveryRow
from services.meter.webhooks.delivery import Deliverer
from services.meter.webhooks.guard import Guard
from services.meter.webhooks.scans import Scans
from services.meter.webhooks.sealing import Sealer
from services.meter.webhooks.service import MAX_WEBHOOKS, WebhookService
from tests.support import Receiver
from trainyard.job.v1 import job_pb2
from trainyard.webhook.v1 import webhook_pb2, webhook_service_pb2

ACME = Principal(key_id="key_acme", org="acme", role="admin")
GLOBEX = Principal(key_id="key_globex", org="globex", role="admin")
MASTER = b"m" * 32


@dataclasses.dataclass
class Hooks:
    store: Store
    service: WebhookService
    deliverer: Deliverer
    sealer: Sealer

    def create(
        self, url: str, events: list[str], who: Principal = ACME, **fields: Any
    ) -> webhook_pb2.Webhook:
        request = webhook_service_pb2.CreateWebhookRequest(url=url, events=events, **fields)
        return self.service.create(who, request)

    def deliver_until(self, holds: Callable[[], bool], timeout: float = 30) -> None:
        """Run the worker's rounds until `holds()`, or fail at the deadline."""

        async def rounds() -> None:
            deadline = asyncio.get_running_loop().time() + timeout
            async with self.deliverer.client() as client:
                while not holds():
                    assert asyncio.get_running_loop().time() < deadline, "never held"
                    await self.deliverer.round(client)
                    await asyncio.sleep(0.02)

        asyncio.run(rounds())

    def log(self, hook_id: str, who: Principal = ACME) -> list[webhook_pb2.Delivery]:
        return self.service.deliveries(who, hook_id, size=100, token="")[0]


def make_hooks(store: Store, tmp_path: Any, **settings: str) -> Hooks:
    env = {
        "TRAINYARD_HOME": str(tmp_path / "home"),
        "TRAINYARD_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
        "TRAINYARD_WEBHOOK_RETRY_SCHEDULE": "0,0.1",
        "TRAINYARD_WEBHOOK_RETRY_WINDOW_SECONDS": "60",
        **settings,
    }
    config = Config.from_env(env)
    sealer, guard = Sealer(MASTER), Guard(config.webhook_allowed_networks)
    tokens = PageTokens(keys.derive(MASTER, "page-tokens"))
    return Hooks(
        store,
        WebhookService(store, sealer, guard, tokens),
        Deliverer(store, config, sealer, guard),
        sealer,
    )


@pytest.fixture
def hooks(store: Store, tmp_path: Any) -> Hooks:
    return make_hooks(store, tmp_path)


def add_job(store: Store, org: str = "acme", status: str = JobStatus.RUNNING, **fields: Any) -> str:
    now = utcnow()
    job_id = ids.new_id("job")
    with store.unit() as session:
        session.add(
            JobRow(
                id=job_id, org=org, project="p", number=int(now.timestamp() * 1e6) % 10**9,
                status=status, spec={}, plan={}, preparation={"status": "verified"},
                attempt_count=1, event_seq=0, create_time=now, update_time=now, **fields,
            )
        )  # fmt: skip
    return job_id


def end_job(store: Store, job_id: str, target: str = JobStatus.FAILED) -> None:
    with store.unit() as session:
        job = session.get(JobRow, job_id)
        assert job is not None
        move_job(session, job, JobStatus(target), failure=failure_of("trainer_failed"))


def data(delivery: webhook_pb2.Delivery) -> dict[str, Any]:
    """The `data` of the payload a delivery sent, as JSON."""
    return dict(json_format.MessageToDict(delivery.payload)["data"])


def queued(store: Store) -> list[DeliveryRow]:
    with store.unit(write=False) as session:
        rows = list(session.scalars(sa.select(DeliveryRow).order_by(DeliveryRow.create_time)))
        session.expunge_all()  # read as they are: the read-only unit rolls back
        return rows


def test_a_job_end_is_queued_with_its_move_and_delivered_signed(hooks: Hooks) -> None:
    with Receiver() as receiver:
        made = hooks.create(receiver.url, ["job.failed", "job.succeeded"], description="ops")
        assert made.secret.startswith("whsec_") and made.id.startswith("wh_")
        hooks.create(receiver.url, ["job.stalled"])  # subscribes to something else
        hooks.create(receiver.url, ["job.failed"], who=GLOBEX)  # another org's
        job_id = add_job(hooks.store)

        # A move that rolls back queues nothing.
        with pytest.raises(RuntimeError), hooks.store.unit() as session:
            job = session.get(JobRow, job_id)
            assert job is not None
            move_job(session, job, JobStatus.FAILED, failure=failure_of("trainer_failed"))
            raise RuntimeError("the caller's transaction fails after the move")
        assert queued(hooks.store) == []

        end_job(hooks.store, job_id)
        end_job(hooks.store, job_id)  # a replay of the same state: no second event
        (row,) = queued(hooks.store)
        assert (row.org, row.webhook_id, row.event_type) == ("acme", made.id, "job.failed")

        hooks.deliver_until(lambda: len(receiver.received) == 1)
        (sent_headers, body) = receiver.received[0]
        message = Webhook(made.secret).verify(body, sent_headers)
        assert message["type"] == "job.failed"
        assert message["data"]["job_id"] == job_id
        assert message["data"]["failure_code"] == "trainer_failed"
        assert message["data"]["cost_micro_cents"] == 0
        assert sent_headers["webhook-id"] == row.message_id and row.message_id.startswith("msg_")
        hooks.deliver_until(lambda: hooks.log(made.id)[0].status == "succeeded")
        (logged,) = hooks.log(made.id)
        assert (logged.attempts, logged.last_status_code, logged.last_error) == (1, 200, "")
        assert not logged.HasField("next_attempt_time")
        assert data(logged)["job_id"] == job_id
    # The secret is kept sealed: no row holds it in the clear.
    with hooks.store.engine.connect() as conn:
        dumped = repr(conn.execute(sa.text("SELECT * FROM webhooks")).all())
    assert made.secret not in dumped and made.secret[6:] not in dumped


def test_a_failing_receiver_is_retried_with_the_same_message_until_it_answers(
    hooks: Hooks,
) -> None:
    with Receiver(answers=[500, 503]) as receiver:
        made = hooks.create(receiver.url, ["job.cancelled"])
        end_job(hooks.store, add_job(hooks.store, status=JobStatus.QUEUED), JobStatus.CANCELLED)
        hooks.deliver_until(lambda: hooks.log(made.id)[0].status == "succeeded")
        ids_sent = {h["webhook-id"] for h, _ in receiver.received}
    (logged,) = hooks.log(made.id)
    assert (logged.attempts, logged.last_status_code, logged.last_error) == (3, 200, "")
    assert len(receiver.received) == 3 and ids_sent == {logged.message_id}


def test_a_delivery_no_attempt_gets_through_fails_once_its_window_is_spent(
    store: Store, tmp_path: Any
) -> None:
    hooks = make_hooks(store, tmp_path, TRAINYARD_WEBHOOK_RETRY_WINDOW_SECONDS="0.6")
    with Receiver(answers=[500] * 100) as receiver:
        made = hooks.create(receiver.url, ["job.failed"])
        end_job(store, add_job(store))
        hooks.deliver_until(lambda: hooks.log(made.id)[0].status == "failed")
    (logged,) = hooks.log(made.id)
    assert (logged.last_status_code, logged.last_error) == (500, "http_status")
    assert logged.attempts >= 3 and not logged.HasField("next_attempt_time")
    assert len(receiver.received) == logged.attempts


def test_an_address_the_guard_refuses_at_delivery_is_recorded_and_never_sent(
    store: Store, tmp_path: Any
) -> None:
    allowing = make_hooks(store, tmp_path)
    refusing = make_hooks(store, tmp_path, TRAINYARD_WEBHOOK_ALLOWED_NETWORKS="")
    with Receiver() as receiver:
        # Registered while the operator allowed loopback; allowed no longer.
        made = allowing.create(receiver.url, ["job.failed"])
        end_job(store, add_job(store))
        refusing.deliver_until(lambda: refusing.log(made.id)[0].attempts == 1)
        assert receiver.received == []
    (logged,) = refusing.log(made.id)
    assert (logged.status, logged.last_error, logged.last_status_code) == (
        "pending",
        "address_not_allowed",
        0,
    )


def test_a_redelivery_sends_the_same_message_id_as_a_new_entry_of_the_log(hooks: Hooks) -> None:
    with Receiver() as receiver:
        made = hooks.create(receiver.url, ["job.failed"])
        end_job(hooks.store, add_job(hooks.store))
        hooks.deliver_until(lambda: len(receiver.received) == 1)
        first = hooks.log(made.id)[0]
        again = hooks.service.redeliver(ACME, made.id, first.id)
        assert (again.message_id, again.redelivery_of, again.status) == (
            first.message_id,
            first.id,
            "pending",
        )
        hooks.deliver_until(lambda: len(receiver.received) == 2)
        (h1, b1), (h2, b2) = receiver.received
    assert h1["webhook-id"] == h2["webhook-id"] == first.message_id and b1 == b2
    for h, b in receiver.received:
        Webhook(made.secret).verify(b, h)
    assert [d.id for d in hooks.log(made.id)] == [again.id, first.id]  # newest first
    # Another org's endpoint, or a delivery of another endpoint, answers as unknown.
    other = hooks.create(receiver.url, ["job.failed"])
    for who, hook_id, delivery_id in [
        (GLOBEX, made.id, first.id),
        (ACME, other.id, first.id),
        (ACME, made.id, "whd_0000000000000000"),
        (ACME, made.id, "../x"),
    ]:
        with pytest.raises(errors.NotFound):
            hooks.service.redeliver(who, hook_id, delivery_id)


def test_two_workers_never_claim_the_same_delivery(store: Store, tmp_path: Any) -> None:
    first, second = make_hooks(store, tmp_path), make_hooks(store, tmp_path)
    made = first.create("http://127.0.0.1:9/hook", ["job.failed"])
    for _ in range(12):
        end_job(store, add_job(store))
    claims: dict[str, list[str]] = {}
    start = threading.Barrier(2)

    def claim(name: str, hooks: Hooks) -> None:
        start.wait()
        claims[name] = [c.id for c in hooks.deliverer.claim()]

    threads = [
        threading.Thread(target=claim, args=(n, h)) for n, h in [("a", first), ("b", second)]
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not set(claims["a"]) & set(claims["b"])
    assert sorted(claims["a"] + claims["b"]) == sorted(d.id for d in first.log(made.id))


def test_thresholds_are_announced_once_as_metering_crosses_them(hooks: Hooks) -> None:
    made = hooks.create(
        "http://127.0.0.1:9/hook",
        ["budget.threshold", "spend_cap.threshold"],
        thresholds_percent=[50, 100],
    )
    job_id, start = add_job(hooks.store), utcnow() - dt.timedelta(seconds=60)
    policy = windows.Policy(window=300, free_cents=1000)
    # One cent a device-second; a 10-cent budget, a 20-cent cap on the org, 8 on the project.
    resources = job_pb2.Resources(budget=10)
    with hooks.store.unit() as session:
        ledger.wallet(session, "acme", free_cents=1000, now=start).spend_cap = 20 * 10**6
        session.add(SpendCapRow(org="acme", project="p", micro_cents=8 * 10**6))
        session.add(
            HoldRow(
                task_id="tsk_0000000000000001", epoch=1, org="acme", job_id=job_id, project="p",
                charged=True, meter="m", rate=3600 * 10**6, devices=1, held_seconds=3600,
                status="live", start_time=start, update_time=start,
            )
        )  # fmt: skip
    for second in (3, 6, 8, 9, 10, 12):  # the clock at each report
        with hooks.store.unit() as session:
            hold = session.get(HoldRow, ("tsk_0000000000000001", 1))
            assert hold is not None
            windows.meter(
                session, policy, hold, resources, start + dt.timedelta(seconds=second), True
            )
    events = sorted(
        (d.event_type, data(d).get("scope", "job"), int(data(d)["threshold_percent"]))
        for d in hooks.log(made.id)
    )
    assert events == [
        ("budget.threshold", "job", 50),
        ("budget.threshold", "job", 100),
        ("spend_cap.threshold", "org", 50),
        ("spend_cap.threshold", "project", 50),
        ("spend_cap.threshold", "project", 100),
    ]


def test_the_scans_announce_a_stall_and_an_expiry_once_each(hooks: Hooks) -> None:
    now = utcnow()
    made = hooks.create(
        "http://127.0.0.1:9/hook",
        ["job.stalled", "artifact.expiring"],
        stalled_after_seconds=60,
        expiring_within_seconds=7200,
    )
    silent = add_job(hooks.store)
    busy = add_job(hooks.store)
    waiting = add_job(hooks.store, status=JobStatus.QUEUED)
    with hooks.store.unit() as session:
        for job_id in (silent, waiting):
            row = session.get(JobRow, job_id)
            assert row is not None
            row.update_time = now - dt.timedelta(minutes=5)

        def stored(sha: str, kind: str, expires_in: float) -> None:
            session.add(
                ObjectRow(
                    org="acme", sha256=sha, id=ids.new_id("obj"), size=10, kind=kind, name=kind,
                    status="stored", job_id=silent, create_time=now,
                    expires_at=now + dt.timedelta(seconds=expires_in),
                )
            )  # fmt: skip

        stored("a" * 64, "checkpoint", 3600)
        stored("b" * 64, "dataset", 3600)  # not an output
        stored("c" * 64, "lora", 3 * 3600)  # later than the notice
        stored("d" * 64, "lora", 3600)
        session.flush()
        session.add(
            PublicationRow(
                org="acme", name="kept", job_id=silent, sha256="d" * 64, base_sha256="0" * 64,
                kind="lora", form="full", publish_time=now,
            )
        )  # fmt: skip
    scans = Scans(hooks.store)
    assert scans.run() == "webhook scans queued 2 deliveries"
    assert scans.run() is None  # found again, queued once
    found = {(d.event_type, data(d).get("job_id")) for d in hooks.log(made.id)}
    assert found == {("job.stalled", silent), ("artifact.expiring", silent)}
    expiring = next(d for d in hooks.log(made.id) if d.event_type == "artifact.expiring")
    assert data(expiring)["sha256"] == "a" * 64
    assert busy not in {data(d).get("job_id") for d in hooks.log(made.id)}
    # The job reports, then goes silent again: a second stall.
    with hooks.store.unit() as session:
        row = session.get(JobRow, silent)
        assert row is not None
        row.update_time = now - dt.timedelta(minutes=2)
    scans.run()
    assert [d.event_type for d in hooks.log(made.id)].count("job.stalled") == 2


def test_every_field_is_bounded_and_refused_naming_it(hooks: Hooks) -> None:
    url = "http://127.0.0.1:9/hook"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": url, "events": []}, "events"),
        ({"url": url, "events": ["job.exploded"]}, "events"),
        ({"url": url, "events": ["job.failed", "job.failed"]}, "events"),
        ({"url": url, "events": ["job.failed"], "description": "x\ny"}, "description"),
        ({"url": url, "events": ["job.failed"], "description": "x" * 257}, "description"),
        ({"url": url, "events": ["job.failed"], "stalled_after_seconds": -1}, "stalled_after_seconds"),
        ({"url": url, "events": ["job.failed"], "stalled_after_seconds": 604_801}, "stalled_after_seconds"),
        ({"url": url, "events": ["job.failed"], "expiring_within_seconds": 7_776_001}, "expiring_within_seconds"),
        ({"url": url, "events": ["job.failed"], "thresholds_percent": [0]}, "thresholds_percent"),
        ({"url": url, "events": ["job.failed"], "thresholds_percent": [101]}, "thresholds_percent"),
        ({"url": url, "events": ["job.failed"], "thresholds_percent": [5, 5]}, "thresholds_percent"),
        ({"url": url, "events": ["job.failed"], "thresholds_percent": list(range(1, 12))}, "thresholds_percent"),
        ({"url": "http://10.0.0.1/hook", "events": ["job.failed"]}, "url"),
        ({"url": "", "events": ["job.failed"]}, "url"),
    ]  # fmt: skip
    for fields, field in cases:
        with pytest.raises(errors.ValidationError) as caught:
            hooks.service.create(ACME, webhook_service_pb2.CreateWebhookRequest(**fields))
        assert caught.value.metadata["field"] == field, fields
    unknown = pytest.raises(errors.ValidationError)
    with unknown as caught:
        hooks.create(url, ["job.exploded"])
    assert "job.stalled" in caught.value.metadata["supported"].split(",")
    assert hooks.service.webhooks(ACME, size=0, token="") == ([], "")  # nothing was made
    made = hooks.create(url, ["budget.threshold", "job.stalled", "artifact.expiring"])
    assert (made.stalled_after_seconds, made.expiring_within_seconds) == (900, 86_400)
    assert list(made.thresholds_percent) == [50, 80, 100]


def test_an_org_holds_at_most_its_limit_and_reads_its_own_newest_first(hooks: Hooks) -> None:
    url = "http://127.0.0.1:9/hook"
    made = [hooks.create(url, ["job.failed"]).id for _ in range(MAX_WEBHOOKS)]
    with pytest.raises(errors.ResourceExhausted) as caught:
        hooks.create(url, ["job.failed"])
    assert caught.value.reason == "WEBHOOK_LIMIT"
    pages, token = [], ""
    while True:
        page, token = hooks.service.webhooks(ACME, size=7, token=token)
        pages.append([w.id for w in page])
        assert all(not w.secret for w in page)  # shown once, at create
        if not token:
            break
    assert [len(p) for p in pages] == [7, 7, 6]
    assert [i for p in pages for i in p] == sorted(made, key=made.index, reverse=True)
    assert hooks.service.get(ACME, made[0]).secret == ""
    with pytest.raises(errors.NotFound):
        hooks.service.get(GLOBEX, made[0])
    with pytest.raises(errors.NotFound):
        hooks.service.deliveries(GLOBEX, made[0], size=0, token="")
    with pytest.raises(errors.ValidationError):  # a token of another list
        hooks.service.deliveries(ACME, made[0], size=0, token="x.y")
    assert hooks.service.webhooks(GLOBEX, size=0, token="") == ([], "")
    # A deletion takes the endpoint's log with it, and nothing more is sent to it.
    end_job(hooks.store, add_job(hooks.store))
    assert len(queued(hooks.store)) == MAX_WEBHOOKS
    assert hooks.service.delete(GLOBEX, made[0]) is True  # another org's: nothing happens
    assert hooks.service.delete(ACME, made[0]) is True
    assert hooks.service.delete(ACME, made[0]) is True  # a repeat is a no-op
    assert len(queued(hooks.store)) == MAX_WEBHOOKS - 1
    with pytest.raises(errors.NotFound):
        hooks.service.get(ACME, made[0])
