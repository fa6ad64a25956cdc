"""A training client's money (HIP-1333 §10): its windows of engine-seconds held, metered
and renewed as a task's are (`windows`), and each forwarded operation that succeeded
charged once at the `client-second` rate."""

from __future__ import annotations

import datetime as dt
import math

from sqlalchemy.orm import Session

from services.core import webhooks
from services.core.money import ledger, rates
from services.core.money.rates import cost
from services.core.money.tables import HoldRow
from services.core.money.windows import Policy, refuse, weigh
from services.core.states import HoldStatus


def charge_client(
    session: Session,
    policy: Policy,
    *,
    org: str,
    client_id: str,
    seq: int,
    engine_seconds: float,
    now: dt.datetime,
) -> int:
    """Charge one forwarded client operation that succeeded by its engine-seconds at the
    `client-second` rate (HIP-1333 §10), named by the client and the call's sequence
    number so a retried call is charged once; what it charged."""
    per_second = rates.rate(session, rates.CLIENT)[0]
    amount = int(engine_seconds * per_second)
    wallet = ledger.wallet(session, org, free_cents=policy.free_cents, now=now)
    applied = amount > 0 and ledger.post(
        session,
        wallet,
        f"client/{client_id}/{seq}",
        "client",
        -amount,
        now=now,
        quantity=engine_seconds,
    )
    if applied:
        webhooks.charged(
            session, org=org, project="", job_id="", amount=amount, budget=None, now=now
        )
    return amount if applied else 0


def open_client_hold(
    session: Session, policy: Policy, *, org: str, client_id: str, charged: bool, now: dt.datetime
) -> None:
    """Hold a client's first window of engine-seconds, as a claim holds a task's: refused
    with the money wire's reasons when its payer cannot (HIP-1333 §10); metered, never
    charged, on the org's own engine."""
    rate = rates.rate(session, rates.CLIENT)[0] * 3600 if charged else 0
    if charged:
        wallet = ledger.wallet(session, org, free_cents=policy.free_cents, now=now)
        refuse(
            weigh(session, wallet, cost(policy.window, rate), project="", now=now),
            "the client's first window",
        )
    session.add(
        HoldRow(
            task_id=client_id,
            epoch=1,
            org=org,
            job_id="",
            project="",
            charged=charged,
            meter=rates.CLIENT,
            rate=rate,
            devices=1,
            held_seconds=policy.window,
            status=HoldStatus.LIVE,
            start_time=now,
            update_time=now,
        )
    )


def meter_client(
    session: Session,
    policy: Policy,
    hold: HoldRow,
    *,
    seq: int,
    engine_seconds: float,
    now: dt.datetime,
) -> int:
    """Meter one client operation that succeeded and charge it (named by the client and
    the call, so once); hold the next window when little is left. What it charged."""
    amount = 0
    if hold.charged:
        amount = charge_client(
            session,
            policy,
            org=hold.org,
            client_id=hold.task_id,
            seq=seq,
            engine_seconds=engine_seconds,
            now=now,
        )
        hold.charged_micro_cents += amount
    hold.used_seconds = min(hold.held_seconds, hold.used_seconds + math.ceil(engine_seconds))
    hold.update_time = now
    if hold.held_seconds - hold.used_seconds < policy.renew_below:
        refusal = ""
        if hold.charged:
            wallet = ledger.wallet(session, hold.org, free_cents=policy.free_cents, now=now)
            refusal = weigh(session, wallet, cost(policy.window, hold.rate), project="", now=now)
        if refusal:
            hold.refusal = refusal
        else:
            hold.held_seconds += policy.window
            hold.refusal = ""
    return amount


def client_refusal(hold: HoldRow | None) -> None:
    """Refuse a call on a client whose held window is spent and could not be renewed."""
    if hold is not None and hold.refusal and hold.used_seconds >= hold.held_seconds:
        refuse(hold.refusal, "the client's next window")
