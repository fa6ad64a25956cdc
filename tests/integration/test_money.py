"""Money on real rows, SQLite and PostgreSQL, with the clock in the test's hand: a claim
holds a window, each report charges what the clock metered, the next window is asked for
under 180 s a device, a job is stopped at its bounds or its payer's money with `cancel`,
ends release what was held, and a payer weighs every live hold (HIP-1333 §10)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as dt
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from services.claims.leases import Leases
from services.claims.reports import Reports
from services.core import errors, ids, lifecycle
from services.core.auth import Principal
from services.core.config import Config
from services.core.money import client_windows, ledger, rates, storage, windows
from services.core.money.tables import EntryRow, HoldRow, PostingRow, WalletRow
from services.core.object_tables import ObjectRow
from services.core.offers import Offer
from services.core.pagetoken import PageTokens
from services.core.store import Store
from services.core.tables import AttemptRow, JobRow, TaskRow
from services.meter.service import MeterService
from trainyard.claim.v1 import task_pb2

PLATFORM = Principal("key_platform0000000", "platform", "platform")
CPU = rates.CPU_HOUR  # micro-cents a device-hour: 8 cents
SUPPORTS = task_pb2.Supports(
    adaptations=["full", "lora"], outputs=["checkpoint", "lora", "capability"]
)
RUNNING = task_pb2.TaskEvent(type="status", status="running")


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@dataclasses.dataclass
class Bench:
    store: Store
    clock: Clock
    leases: Leases
    reports: Reports
    made: int = 0

    def job(self, org: str = "acme", *, devices: int = 1, **resources: int) -> str:
        """A verified platform job with one open lead task, as preparation leaves it."""
        now, job_id = self.clock(), ids.new_id("job")
        self.made += 1
        spec = {"base_model": "fixture-tiny-llm", "adaptation": {"mode": "full"},
                "output": {"kind": "checkpoint"}, "resources": resources}  # fmt: skip
        with self.store.unit() as session:
            session.add(
                JobRow(
                    id=job_id, org=org, project="default", number=self.made,
                    status="preparing", spec=spec, plan={"planned_steps": 10},
                    preparation={"status": "verified"}, attempt_count=1, event_seq=0,
                    create_time=now, update_time=now,
                )
            )  # fmt: skip
            session.flush()
            session.add(
                AttemptRow(
                    id=ids.new_id("att"), job_id=job_id, org=org, attempt_number=1,
                    status="queued", create_time=now,
                )
            )  # fmt: skip
            session.add(
                TaskRow(
                    id=ids.new_id("tsk"), org=org, job_id=job_id, attempt_number=1, position=0,
                    role="lead", machine="", world_size=1, status="open", create_time=now,
                )
            )  # fmt: skip
        return job_id

    def claim(self, devices: int = 1, *, run: bool = True):  # type: ignore[no-untyped-def]
        """Claim the next task; with `run`, its trainer reports `running` at once, so it is
        metered from the claim's second (a task is metered from its training's start)."""
        offer = Offer.parse("gpu-0", True, ["fixture-tiny-llm"], ["cpu"] * devices, SUPPORTS)
        answer = self.leases.claim(PLATFORM, offer)
        if answer is not None and run:
            self.report(answer, [RUNNING])
        return answer

    def report(self, answer, events=()):  # type: ignore[no-untyped-def]
        return self.reports.report(
            PLATFORM, answer.task.job, answer.task.id, answer.task.lease, list(events)
        )

    def status(self, job_id: str) -> tuple[str, str]:
        with self.store.unit(write=False) as session:
            job = session.get(JobRow, job_id)
            assert job is not None
            return job.status, job.failure_code

    def balance(self, org: str = "acme") -> int:
        with self.store.unit(write=False) as session:
            wallet = session.get(WalletRow, org)
            return wallet.balance if wallet else 0

    def credit(self, cents: int, org: str = "acme", name: str = "top-up") -> None:
        with self.store.unit() as session:
            wallet = ledger.wallet(session, org, free_cents=0, now=self.clock())
            ledger.post(
                session, wallet, f"credit/{name}", "credit", cents * 10**6, now=self.clock()
            )


def books_balance(store: Store) -> None:
    """Every transaction's postings sum to zero; every wallet is the sum of its account."""
    with store.unit(write=False) as session:
        unbalanced = session.execute(
            sa.select(PostingRow.entry_id)
            .group_by(PostingRow.entry_id)
            .having(sa.func.sum(PostingRow.micro_cents) != 0)
        ).all()
        assert unbalanced == []
        for wallet in session.scalars(sa.select(WalletRow)):
            posted = session.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(PostingRow.micro_cents), 0)).where(
                    PostingRow.account == ledger.account(wallet.org)
                )
            )
            assert wallet.balance == posted


@pytest.fixture
def bench(store: Store, tmp_path: Path) -> Bench:
    clock = Clock()
    config = Config(home=tmp_path, database_url="", free_credit_cents=0)
    leases = Leases(store, config, clock=clock)
    return Bench(store, clock, leases, Reports(store, leases, clock=clock))


def test_a_budget_of_two_windows_is_held_charged_by_the_clock_and_stopped_at_its_end(
    bench: Bench,
) -> None:
    # 600 device-seconds at 8 cents an hour cost 1,333,333 micro-cents: a budget of 2
    # cents holds two whole windows and a part of a third.
    bench.credit(100)
    job_id = bench.job(budget=2)
    answer = bench.claim()
    assert (answer.task.devices, answer.task.held) == (1, 300)
    seen = []
    for _ in range(200):
        bench.clock.advance(20)
        ack = bench.report(answer)
        seen.append((ack.held, ack.cancel))
        if ack.cancel:
            break
    # Two windows and the 300 s the 2 cents' remainder pays (900 s cost 2,000,000).
    assert seen[-1] == (900, True) and max(h for h, _ in seen) == 900
    assert bench.status(job_id) == ("stopped", "budget")
    with bench.store.unit(write=False) as session:
        (hold,) = session.scalars(sa.select(HoldRow).where(HoldRow.job_id == job_id))
        charged = -session.scalar(
            sa.select(sa.func.sum(EntryRow.micro_cents)).where(EntryRow.job_id == job_id)
        )
        # Stopped under 40 s left, charged exactly what the clock metered, nothing held.
        assert hold.status == "released" and hold.held_seconds == hold.used_seconds > 900 - 40
        assert charged == hold.charged_micro_cents == rates.cost(hold.used_seconds, CPU)
    assert bench.balance() == 100 * 10**6 - charged
    # A report after the stop records nothing and still says cancel.
    bench.clock.advance(20)
    assert bench.report(answer).cancel is True
    assert bench.balance() == 100 * 10**6 - charged
    books_balance(bench.store)


def test_max_seconds_bounds_the_device_seconds_of_every_device(bench: Bench) -> None:
    bench.credit(100)
    job_id = bench.job(budget=100, max_seconds=500)
    answer = bench.claim(devices=2)
    assert (answer.task.devices, answer.task.held) == (2, 500)
    bench.clock.advance(240)  # 480 device-seconds: 20 left, under 2 × 40
    ack = bench.report(answer)
    assert ack.cancel is True and bench.status(job_id) == ("stopped", "max_seconds")


def test_a_payer_holding_one_window_runs_one_job_and_the_other_waits(bench: Bench) -> None:
    # One window of one CPU costs 666,666 micro-cents; the wallet holds one and a half.
    with bench.store.unit() as session:
        wallet = ledger.wallet(session, "acme", free_cents=0, now=bench.clock())
        ledger.post(session, wallet, "credit/one", "credit", 1_000_000, now=bench.clock())
    first, second = bench.job(budget=100), bench.job(budget=100)
    answer = bench.claim()
    assert answer is not None and answer.task.job == first
    assert bench.claim() is None  # the second waits: the payer's money is held
    assert bench.status(second) == ("preparing", "")
    # The first ends: its hold is released and the second runs.
    bench.clock.advance(30)
    bench.report(
        answer, [task_pb2.TaskEvent(type="status", status="failed", error="trainer_failed")]
    )
    assert bench.status(first)[0] == "failed"
    assert bench.claim().task.job == second
    books_balance(bench.store)


def test_a_balance_that_cannot_pay_a_first_window_stops_the_job_before_it_runs(
    bench: Bench,
) -> None:
    job_id = bench.job(budget=100)  # no credit at all
    assert bench.claim() is None
    assert bench.status(job_id) == ("stopped", "insufficient_balance")


def test_a_platform_claim_gets_fewer_devices_when_its_payer_holds_fewer(bench: Bench) -> None:
    # Money for two CPU windows, not four: halved from 4 offered to 2.
    with bench.store.unit() as session:
        wallet = ledger.wallet(session, "acme", free_cents=0, now=bench.clock())
        ledger.post(session, wallet, "credit/two", "credit", 1_400_000, now=bench.clock())
    bench.job(budget=100)
    answer = bench.claim(devices=4)
    assert (answer.task.devices, answer.task.held) == (2, 600)


def test_a_refused_window_runs_what_is_held_and_asks_again_at_every_report(bench: Bench) -> None:
    with bench.store.unit() as session:
        wallet = ledger.wallet(session, "acme", free_cents=0, now=bench.clock())
        ledger.post(session, wallet, "credit/one", "credit", 700_000, now=bench.clock())
    job_id = bench.job(budget=100)
    answer = bench.claim()
    bench.clock.advance(200)  # 100 s left: the next window is asked for and refused
    ack = bench.report(answer)
    assert (ack.held, ack.cancel) == (300, False)
    bench.credit(100, name="later")  # money arrives: the next report is granted
    bench.clock.advance(20)
    ack = bench.report(answer)
    assert (ack.held, ack.cancel) == (600, False) and bench.status(job_id)[0] == "running"


def test_twenty_replays_of_a_report_charge_once(bench: Bench) -> None:
    bench.credit(100)
    bench.job(budget=100)
    answer = bench.claim()
    bench.clock.advance(60)
    events = [task_pb2.TaskEvent(type="metric", name="loss", step=1, value=1.0, seq=1)]
    for _ in range(20):
        bench.report(answer, events)
    assert bench.balance() == 100 * 10**6 - rates.cost(60, CPU)
    books_balance(bench.store)


def test_a_lapsed_lease_is_charged_through_its_last_report_and_releases_the_rest(
    bench: Bench,
) -> None:
    bench.credit(100)
    job_id = bench.job(budget=100)
    answer = bench.claim()
    bench.clock.advance(100)
    bench.report(answer)
    bench.clock.advance(3600)  # silent past its lease
    assert bench.leases.expire() == 1
    with bench.store.unit(write=False) as session:
        (hold,) = session.scalars(sa.select(HoldRow).where(HoldRow.job_id == job_id))
        assert (hold.status, hold.used_seconds, hold.held_seconds) == ("released", 100, 100)
    assert bench.balance() == 100 * 10**6 - rates.cost(100, CPU)
    with pytest.raises(errors.DomainError) as lost:
        bench.report(answer)
    assert lost.value.reason == "LEASE_LOST"


def test_a_job_on_the_orgs_own_machines_is_metered_and_charged_nothing(bench: Bench) -> None:
    job_id = bench.job(max_seconds=100)
    with bench.store.unit() as session:
        task = session.scalar(sa.select(TaskRow).where(TaskRow.job_id == job_id))
        task.machine = "gpu-0"
    acme = Principal("key_acme0000000000", "acme", "executor")
    offer = Offer.parse("gpu-0", False, ["fixture-tiny-llm"], ["cpu"], SUPPORTS)
    answer = bench.leases.claim(acme, offer)
    assert answer.task.held == 100
    bench.reports.report(acme, job_id, answer.task.id, answer.task.lease, [RUNNING])
    bench.clock.advance(70)
    ack = bench.reports.report(acme, job_id, answer.task.id, answer.task.lease, [])
    assert ack.cancel is True and bench.status(job_id) == ("stopped", "max_seconds")
    with bench.store.unit(write=False) as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(EntryRow)) == 0
        (hold,) = session.scalars(sa.select(HoldRow))
        assert (hold.used_seconds, hold.charged_micro_cents) == (70, 0)


def test_any_end_releases_what_the_job_held(bench: Bench) -> None:
    bench.credit(100)
    job_id = bench.job(budget=100)
    answer = bench.claim()
    bench.clock.advance(30)
    bench.report(answer)
    with bench.store.unit() as session:
        job = session.get(JobRow, job_id)
        assert job is not None
        lifecycle.cancel(session, job)
    with bench.store.unit(write=False) as session:
        assert windows.live_holds(session, "acme") != []  # cancelling: the trainer saves
    bench.clock.advance(10)
    bench.report(answer, [task_pb2.TaskEvent(type="status", status="cancelled")])
    with bench.store.unit(write=False) as session:
        assert windows.live_holds(session, "acme") == []
    assert bench.balance() == 100 * 10**6 - rates.cost(40, CPU)


def test_storage_is_charged_by_the_gb_month_once_per_span(bench: Bench, tmp_path: Path) -> None:
    service = MeterService(
        bench.store, Config(home=tmp_path, database_url="", free_credit_cents=0),
        PageTokens(b"k" * 32), clock=bench.clock,
    )  # fmt: skip
    bench.credit(100)
    with bench.store.unit() as session:
        for n, status in enumerate(("stored", "pending")):  # bytes pending are not charged
            session.add(
                ObjectRow(
                    org="acme", sha256=f"{n:064x}", id=ids.new_id("obj"), size=10 * storage.GB,
                    kind="dataset", name="d", status=status, create_time=bench.clock(),
                )
            )  # fmt: skip
    assert service.sweep_storage() == (0, 0)  # the first sweep sets the watermark
    bench.clock.advance(3600)
    # 10 GB for an hour at $0.02 a GB-month (30 days): 27,777 micro-cents.
    assert service.sweep_storage() == (1, 10 * 2_000_000 * 3600 // storage.MONTH_SECONDS)
    assert service.sweep_storage() == (0, 0)  # the span is charged; nothing new since
    with bench.store.unit() as session:
        session.get(ObjectRow, ("acme", f"{0:064x}")).status = "deleted"
    bench.clock.advance(3600)
    assert service.sweep_storage() == (0, 0)  # deleted: no longer charged
    with bench.store.unit(write=False) as session:
        spans = session.scalars(sa.select(EntryRow.span).where(EntryRow.kind == "storage")).all()
    assert len(spans) == 1 and spans[0].count("/") == 1
    assert bench.balance() == 100 * 10**6 - 27_777
    books_balance(bench.store)


def test_a_grant_needs_a_payer_that_holds_a_month_of_what_the_org_keeps(bench: Bench) -> None:
    policy = windows.Policy()
    bench.credit(1)  # one cent: a month of 0.5 GB, not of 1 GB
    with bench.store.unit() as session:
        storage.admit(session, policy, "acme", storage.GB // 2, besides="", now=bench.clock())
    with pytest.raises(errors.DomainError) as refused, bench.store.unit() as session:
        storage.admit(session, policy, "acme", storage.GB, besides="", now=bench.clock())
    assert refused.value.reason == "INSUFFICIENT_BALANCE"


def test_a_client_operation_is_charged_its_engine_seconds_once(bench: Bench) -> None:
    bench.credit(1)
    for _ in range(3):  # a retried call keeps its sequence number
        with bench.store.unit() as session:
            client_windows.charge_client(
                session, windows.Policy(), org="acme", client_id="cli_0123456789abcdef", seq=7,
                engine_seconds=2.5, now=bench.clock(),
            )  # fmt: skip
    assert bench.balance() == 10**6 - int(2.5 * rates.CLIENT_SECOND)
    books_balance(bench.store)


def test_two_reports_never_weigh_one_balance_at_once(bench: Bench) -> None:
    # Two tasks of one payer each hold a window; the wallet holds one more window, not two.
    with bench.store.unit() as session:
        wallet = ledger.wallet(session, "acme", free_cents=0, now=bench.clock())
        ledger.post(session, wallet, "credit/some", "credit", 2_100_000, now=bench.clock())
    bench.job(budget=100)
    bench.job(budget=100)
    answers = [bench.claim(), bench.claim()]
    bench.clock.advance(200)  # 100 s left each: both ask for their next window at once
    start = threading.Barrier(2)

    def report(answer):  # type: ignore[no-untyped-def]
        start.wait()
        return bench.report(answer).held

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        held = sorted(pool.map(report, answers))
    assert held == [300, 600]
    with bench.store.unit(write=False) as session:
        assert windows.available(session, session.get(WalletRow, "acme")) >= 0


def charges_of(bench: Bench, job_id: str) -> tuple[int, list[tuple[str, int, int]]]:
    """What the ledger charged a job, and its holds (status, used, held)."""
    with bench.store.unit(write=False) as session:
        charged = session.scalar(
            sa.select(sa.func.coalesce(sa.func.sum(EntryRow.micro_cents), 0)).where(
                EntryRow.job_id == job_id
            )
        )
        holds = session.scalars(sa.select(HoldRow).where(HoldRow.job_id == job_id))
        return -charged, [(h.status, h.used_seconds, h.held_seconds) for h in holds]


def test_a_task_cancelled_while_its_executor_loads_costs_nothing(bench: Bench) -> None:
    # `002_…`: nothing ran, nothing is charged. The claim held a window; the executor
    # loads for two minutes, reporting, and is cancelled before its trainer's `running`.
    bench.credit(100)
    job_id = bench.job(budget=100)
    answer = bench.claim(run=False)
    bench.clock.advance(60)
    bench.report(answer, [task_pb2.TaskEvent(type="status", status="accepted")])
    bench.clock.advance(60)
    bench.report(answer)
    with bench.store.unit() as session:
        job = session.get(JobRow, job_id)
        assert job is not None
        lifecycle.cancel(session, job)
    bench.clock.advance(10)
    bench.report(answer, [task_pb2.TaskEvent(type="status", status="cancelled")])
    assert bench.status(job_id)[0] == "cancelled"
    assert charges_of(bench, job_id) == (0, [("released", 0, 0)])
    assert bench.balance() == 100 * 10**6
    books_balance(bench.store)


def test_an_input_failure_before_training_costs_nothing(bench: Bench) -> None:
    bench.credit(100)
    job_id = bench.job(budget=100)
    answer = bench.claim(run=False)
    bench.clock.advance(45)  # the trainer reads its dataset and finds it unusable
    failed = task_pb2.TaskEvent(type="status", status="failed", error="dataset_changed")
    bench.report(answer, [failed])
    assert bench.status(job_id) == ("failed", "dataset_changed")
    assert charges_of(bench, job_id) == (0, [("released", 0, 0)])
    assert bench.balance() == 100 * 10**6


def test_a_task_is_charged_from_its_trainers_running_to_its_last_report(bench: Bench) -> None:
    bench.credit(100)
    job_id = bench.job(budget=100)
    answer = bench.claim(run=False)
    bench.clock.advance(90)  # loading the base and the data: not charged
    bench.report(answer, [task_pb2.TaskEvent(type="status", status="accepted")])
    bench.clock.advance(30)
    bench.report(answer, [RUNNING])  # training starts at this report's second
    assert charges_of(bench, job_id)[0] == 0
    bench.clock.advance(60)
    bench.report(answer, [task_pb2.TaskEvent(type="metric", name="loss", step=1, value=1.0)])
    bench.clock.advance(10)  # a run that trained and then failed is charged what it ran
    failed = task_pb2.TaskEvent(type="status", status="failed", error="trainer_failed")
    bench.report(answer, [failed])
    assert charges_of(bench, job_id) == (rates.cost(70, CPU), [("released", 70, 70)])
    assert bench.balance() == 100 * 10**6 - rates.cost(70, CPU)
    books_balance(bench.store)
