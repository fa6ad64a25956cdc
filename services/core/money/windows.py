"""Hold a window, charge what ran (HIP-1333 §10).

A claim holds a task's first window: `window` seconds on each of its devices, clipped to
what the job's `max_seconds` and `budget` leave, then weighed against its payer: the
wallet's balance less everything the payer has committed that the ledger does not know
yet (its live holds beyond what they were charged), and the month's spend against the
org's and the project's caps. Each report meters the task by the clock (its devices times
the seconds since training started, no more than is held) at the rate read at the claim
and charges what that adds. Training starts at the report that carries the trainer's
first `running`: the seconds before it (the queue, the claim, loading the base and the
data) are never charged, so a task cancelled or failed before it trained costs nothing
and its whole hold goes back (`002_…`: the charge is each attempt's active interval,
`started_at` to its end). Under 3/5 of a window a device left, the report asks for the next
one; refused, the task runs what is held and asks again at every report, and under 2/15
a device left the job is stopped with the refusal's reason.

Everything here runs inside the caller's transaction (the claim's, the report's, the
create's), holding the payer's wallet row, so one payer is weighed at a time and a
report's seconds and their charge are durable together. A training client's windows are
`client_windows`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import sqlalchemy as sa
from sqlalchemy.orm import Session

from services.core import errors, webhooks
from services.core.config import Config
from services.core.money import ledger, rates
from services.core.money.rates import MICRO_CENTS_PER_CENT, cost, seconds_for
from services.core.money.tables import HoldRow, WalletRow, holds_read
from services.core.states import HoldStatus
from trainyard.job.v1 import job_pb2


@dataclasses.dataclass(frozen=True)
class Policy:
    """The window and its thresholds, per device; and what a new wallet starts with."""

    window: int = 300
    free_cents: int = 0

    @classmethod
    def of(cls, config: Config) -> Policy:
        return cls(window=config.window_seconds, free_cents=config.free_credit_cents)

    @property
    def renew_below(self) -> int:
        return self.window * 3 // 5

    @property
    def stop_below(self) -> int:
        return self.window * 2 // 15


@dataclasses.dataclass(frozen=True)
class Grant:
    devices: int
    held: int
    rate: int


@dataclasses.dataclass(frozen=True)
class Refusal:
    reason: str
    # True when no later claim could do better (the job's bounds, or a balance that
    # cannot pay even with nothing else held): the job is stopped before it runs.
    final: bool


def device_class(devices: list[str] | tuple[str, ...]) -> str:
    return "cpu" if set(devices) == {"cpu"} else "cuda"


# -- what is committed ----------------------------------------------------------------------


def live_holds(session: Session, org: str) -> list[HoldRow]:
    return list(
        session.scalars(
            sa.select(HoldRow).where(HoldRow.org == org, HoldRow.status == HoldStatus.LIVE)
        )
    )


def committed(holds: list[HoldRow]) -> int:
    """What live holds commit beyond what they were charged."""
    return sum(cost(h.held_seconds, h.rate) - h.charged_micro_cents for h in holds if h.charged)


def weigh(
    session: Session,
    wallet: WalletRow,
    amount: int,
    *,
    project: str,
    now: dt.datetime,
    alone: bool = False,
    key_id: str = "",
) -> str:
    """Why the payer cannot commit `amount` more, or "". `alone` weighs it with nothing
    else committed, as a create does. `key_id`: the API key whose job it is, weighed
    against the key's own monthly cap (`key_spend_cap`) when it has one."""
    holds = [] if alone else live_holds(session, wallet.org)
    if amount > wallet.balance - committed(holds):
        return "insufficient_balance"
    if (
        wallet.spend_cap
        and ledger.spent(session, wallet.org, now) + committed(holds) + amount > wallet.spend_cap
    ):
        return "spend_cap"
    cap = ledger.project_cap(session, wallet.org, project)
    if cap:
        mine = [h for h in holds if h.project == project]
        if ledger.spent(session, wallet.org, now, project=project) + committed(mine) + amount > cap:
            return "spend_cap"
    key_cap = ledger.key_cap(session, key_id) if key_id else None
    if key_cap is not None:
        jobs = ledger.key_jobs(session, key_id, {h.job_id for h in holds if h.job_id})
        theirs = [h for h in holds if h.job_id in jobs]
        if (
            ledger.key_spent(session, wallet.org, key_id, now) + committed(theirs) + amount
            > key_cap
        ):
            return "key_spend_cap"
    return ""


def available(session: Session, wallet: WalletRow) -> int:
    return wallet.balance - committed(live_holds(session, wallet.org))


# -- the job's own bounds -------------------------------------------------------------------


def bounds_left(
    session: Session, job_id: str, resources: job_pb2.Resources, *, unheld: bool = False
) -> tuple[int | None, int | None]:
    """The device-seconds and micro-cents the job's `max_seconds` and `budget` leave after
    every hold of the job (a released hold holds what it used); `unheld`: the caller
    knows it holds none, so none are read."""
    holds = (
        [] if unheld else list(session.scalars(sa.select(HoldRow).where(HoldRow.job_id == job_id)))
    )
    holds_read(session)[job_id] = holds
    seconds = budget = None
    if resources.HasField("max_seconds"):
        seconds = resources.max_seconds - sum(h.held_seconds for h in holds)
    if resources.HasField("budget"):
        budget = resources.budget * MICRO_CENTS_PER_CENT - sum(
            cost(h.held_seconds, h.rate) for h in holds if h.charged
        )
    return seconds, budget


def clip(want: int, rate: int, seconds: int | None, budget: int | None) -> tuple[int, str]:
    """`want` device-seconds clipped to the bounds; 0 with the bound that refused it."""
    got = want
    if seconds is not None and seconds < got:
        got, bound = max(seconds, 0), "max_seconds"
    if budget is not None and rate and seconds_for(budget, rate) < got:
        got, bound = seconds_for(budget, rate), "budget"
    return (got, "") if got > 0 else (0, bound)


# -- claims, reports, ends --------------------------------------------------------------------


def open_hold(
    session: Session,
    policy: Policy,
    *,
    org: str,
    job_id: str,
    project: str,
    resources: job_pb2.Resources,
    task_id: str,
    epoch: int,
    meter: str,
    charged: bool,
    offered: int,
    halve: bool,
    now: dt.datetime,
    key_id: str = "",
    first: bool = False,
) -> Grant | Refusal:
    """Hold a claimed task's first window on as many of the offered devices as its payer
    holds (halving down to one when `halve`), or say why not. `key_id`: the key that
    created the job, whose monthly cap it is weighed against too. `first`: the job's
    first claim, so it holds nothing yet."""
    rate = rates.rate(session, meter)[0] if charged else 0
    seconds, budget = bounds_left(session, job_id, resources, unheld=first)
    wallet = ledger.wallet(session, org, free_cents=policy.free_cents, now=now) if charged else None
    devices = offered
    while True:
        window, bound = clip(policy.window * devices, rate, seconds, budget)
        if not window:
            return Refusal(bound, final=True)
        refusal = (
            weigh(session, wallet, cost(window, rate), project=project, now=now, key_id=key_id)
            if wallet is not None
            else ""
        )
        if not refusal:
            break
        if halve and devices > 1:
            devices //= 2
            continue
        assert wallet is not None
        alone = weigh(
            session,
            wallet,
            cost(window, rate),
            project=project,
            now=now,
            alone=True,
            key_id=key_id,
        )
        return Refusal(refusal, final=bool(alone))
    hold = HoldRow(
        task_id=task_id,
        epoch=epoch,
        org=org,
        job_id=job_id,
        project=project,
        charged=charged,
        meter=meter,
        rate=rate,
        devices=devices,
        held_seconds=window,
        status=HoldStatus.LIVE,
        start_time=now,
        update_time=now,
    )
    session.add(hold)
    holds_read(session)[job_id].append(hold)
    return Grant(devices=devices, held=window, rate=rate)


def start_metering(session: Session, job_id: str, now: dt.datetime) -> None:
    """Training started: the job's live holds are metered from `now` on. A hold's
    `start_time` is its claim until then, and nothing before this is ever used."""
    for hold in session.scalars(
        sa.select(HoldRow).where(HoldRow.job_id == job_id, HoldRow.status == HoldStatus.LIVE)
    ):
        hold.start_time, hold.update_time = now, now


def hold_of(session: Session, task_id: str, epoch: int) -> HoldRow | None:
    return session.scalar(
        sa.select(HoldRow).where(
            HoldRow.task_id == task_id, HoldRow.epoch == epoch, HoldRow.status == HoldStatus.LIVE
        )
    )


def meter(
    session: Session,
    policy: Policy,
    hold: HoldRow,
    resources: job_pb2.Resources,
    now: dt.datetime,
    started: bool,
    key_id: str = "",
) -> str:
    """Meter a task by the clock from when its attempt `started` training (until then
    nothing is used) and charge what that adds; ask for the next window when little is
    left. The reason to stop the job, or "" while it may run. `key_id`: the key that
    created the job, whose monthly cap its next window is weighed against too."""
    used = 0
    if started:
        # Each second begun is charged whole, so an attempt that trained at all costs its
        # first second however soon it ended.
        elapsed = max(math.ceil((now - hold.start_time).total_seconds()), 0)
        used = min(hold.held_seconds, hold.devices * elapsed)
    # The wallet is read only when there is something to charge or a window to weigh: a
    # task reporting many times a second meters whole seconds, so most reports neither.
    wallet = None
    if used > hold.used_seconds:
        before, hold.used_seconds = hold.used_seconds, used
        due = cost(used, hold.rate) - hold.charged_micro_cents
        if hold.charged and due > 0:
            wallet = ledger.wallet(session, hold.org, free_cents=policy.free_cents, now=now)
            posted = ledger.post(
                session,
                wallet,
                f"compute/{hold.task_id}/{hold.epoch}/{used}",
                "compute",
                -due,
                now=now,
                job_id=hold.job_id,
                task_id=hold.task_id,
                project=hold.project,
                quantity=float(used - before),
            )
            hold.charged_micro_cents += due
            if posted:  # a threshold an org's webhook watches may be crossed
                budget = _bounds_of(resources)[1]
                webhooks.charged(
                    session,
                    org=hold.org,
                    project=hold.project,
                    job_id=hold.job_id,
                    amount=due,
                    budget=budget,
                    now=now,
                )
    hold.update_time = now
    left = hold.held_seconds - hold.used_seconds
    if left >= policy.renew_below * hold.devices:
        return ""
    if hold.charged and wallet is None:
        wallet = ledger.wallet(session, hold.org, free_cents=policy.free_cents, now=now)
    seconds, budget = bounds_left(session, hold.job_id, resources)
    window, refusal = clip(policy.window * hold.devices, hold.rate, seconds, budget)
    if window and wallet is not None:
        extra = cost(hold.held_seconds + window, hold.rate) - cost(hold.held_seconds, hold.rate)
        refusal = weigh(session, wallet, extra, project=hold.project, now=now, key_id=key_id)
    if window and not refusal:
        hold.held_seconds += window
        hold.refusal = ""
        return ""
    hold.refusal = refusal
    return refusal if left < policy.stop_below * hold.devices else ""


# -- create ---------------------------------------------------------------------------------


def admit(
    session: Session,
    policy: Policy,
    *,
    org: str,
    project: str,
    resources: job_pb2.Resources,
    meter_name: str,
    now: dt.datetime,
    key_id: str = "",
) -> None:
    """Refuse a job the platform runs whose payer cannot hold one device's first window
    on its own (HIP-1333 §10 Create), with the money wire's reasons; nor one whose key's
    jobs were charged so much this month that the window would pass the key's cap."""
    rate = rates.rate(session, meter_name)[0]
    window, _ = clip(policy.window, rate, *_bounds_of(resources))
    wallet = ledger.wallet(session, org, free_cents=policy.free_cents, now=now)
    refusal = weigh(
        session,
        wallet,
        cost(max(window, 1), rate),
        project=project,
        now=now,
        alone=True,
        key_id=key_id,
    )
    refuse(refusal, "the job's first window")


def refuse(refusal: str, what: str) -> None:
    """Raise a weighing's refusal with the money wire's reason (HIP-1333 §3), naming what
    the wallet was asked to hold."""
    if refusal == "insufficient_balance":
        raise errors.FailedPrecondition(
            f"The wallet cannot hold {what}; add credit.", reason="INSUFFICIENT_BALANCE"
        )
    if refusal == "spend_cap":
        raise errors.FailedPrecondition(
            f"{what[0].upper()}{what[1:]} would pass a monthly spend cap.",
            reason="SPEND_CAP_EXCEEDED",
        )
    if refusal == "key_spend_cap":
        raise errors.FailedPrecondition(
            f"{what[0].upper()}{what[1:]} would pass this API key's monthly spend cap.",
            reason="SPEND_CAP_EXCEEDED",
            metadata={"scope": "key"},
        )


def _bounds_of(resources: job_pb2.Resources) -> tuple[int | None, int | None]:
    seconds = resources.max_seconds if resources.HasField("max_seconds") else None
    budget = resources.budget * MICRO_CENTS_PER_CENT if resources.HasField("budget") else None
    return seconds, budget
