"""MeterService's use cases: rates, an org's wallet and caps, operator credits, the ledger's
pages and a price. Holds and charges move inside the claims and reports that cause them
(`services.core.money`); this serves what they wrote."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

import sqlalchemy as sa
from google.protobuf import timestamp_pb2

from services.core import audit, errors
from services.core.auth import ORG_PATTERN, Principal
from services.core.config import Config
from services.core.money import ledger, rates, storage, windows
from services.core.money.tables import EntryRow, RateRow, SpendCapRow
from services.core.pagetoken import PageTokens, page_size
from services.core.states import ObjectStatus
from services.core.store import Store, retrying, utcnow
from trainyard.meter.v1 import meter_pb2
from trainyard.training.catalog import Catalog

# A credit's name: what makes a repeat one credit (an invoice or transfer id).
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# The most one credit may add: $1,000,000, far past any real top-up, far below 2^63.
MAX_CREDIT = 10**8 * rates.MICRO_CENTS_PER_CENT
MAX_RATE = 10**6 * rates.MICRO_CENTS_PER_CENT


class MeterService:
    def __init__(
        self,
        store: Store,
        config: Config,
        tokens: PageTokens,
        catalog: Catalog | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._store = store
        self._policy = windows.Policy.of(config)
        self._tokens = tokens
        self._catalog = catalog or Catalog()
        self._now = clock

    # -- rates ---------------------------------------------------------------------------

    def list_rates(self) -> list[meter_pb2.Rate]:
        with self._store.unit(write=False) as session:
            return [self._rate(session, m) for m in rates.meters(self._catalog.names)]

    def set_rate(self, principal: Principal, meter: str, micro_cents: int) -> meter_pb2.Rate:
        known = rates.meters(self._catalog.names)
        if meter not in known:
            raise errors.ValidationError(
                "meter",
                "is not a meter of this deployment",
                metadata={"supported": ",".join(known)},
            )
        if not 0 <= micro_cents <= MAX_RATE:
            raise errors.ValidationError("micro_cents", "must be between 0 and $10,000 a unit")

        def work() -> meter_pb2.Rate:
            with self._store.unit() as session:
                row = session.get(RateRow, meter, with_for_update=True)
                if row is None:
                    row = RateRow(meter=meter)
                    session.add(row)
                row.micro_cents, row.update_time = micro_cents, self._now()
                audit.record(
                    session,
                    "training.rate.set",
                    org=principal.org,
                    subject=meter,
                    actor=principal.key_id,
                    micro_cents=micro_cents,
                )
                session.flush()
                return self._rate(session, meter)

        return retrying(work)

    def _rate(self, session: sa.orm.Session, meter: str) -> meter_pb2.Rate:
        value, floor = rates.rate(session, meter)
        return meter_pb2.Rate(meter=meter, micro_cents=value, unit=rates.unit(meter), floor=floor)

    # -- wallets -------------------------------------------------------------------------

    def wallet(self, principal: Principal) -> meter_pb2.Wallet:
        return retrying(lambda: self._wallet(principal.org))

    def _wallet(self, org: str) -> meter_pb2.Wallet:
        now = self._now()
        with self._store.unit() as session:
            return self._wallet_proto(session, org, now)

    def _wallet_proto(
        self, session: sa.orm.Session, org: str, now: dt.datetime
    ) -> meter_pb2.Wallet:
        row = ledger.wallet(session, org, free_cents=self._policy.free_cents, now=now)
        holds = windows.live_holds(session, org)
        answer = meter_pb2.Wallet(
            payer=org,
            balance_micro_cents=row.balance,
            held_micro_cents=windows.committed(holds),
            spend_cap_micro_cents=row.spend_cap,
            spent_micro_cents=ledger.spent(session, org, now),
            available_micro_cents=row.balance - windows.committed(holds),
        )
        # What the org keeps now, as the storage sweep charges it.
        answer.storage_bytes = storage.held_bytes(session, org, ObjectStatus.STORED)
        answer.storage_cost_per_month = storage.month_cents(
            answer.storage_bytes, storage.storage_rate(session)
        )
        for hold in holds:
            answer.holds.add(
                task_id=hold.task_id,
                job_id=hold.job_id,
                payer=org,
                held_seconds=hold.held_seconds,
                used_seconds=hold.used_seconds,
                rate_micro_cents=hold.rate,
                status=hold.status,
                devices=hold.devices,
                charged_micro_cents=hold.charged_micro_cents,
                refusal=hold.refusal,
            )
        caps = session.scalars(
            sa.select(SpendCapRow).where(SpendCapRow.org == org).order_by(SpendCapRow.project)
        )
        for cap in caps:
            answer.project_caps.add(
                project=cap.project,
                micro_cents=cap.micro_cents,
                spent_micro_cents=ledger.spent(session, org, now, project=cap.project),
            )
        return answer

    def credit(
        self, principal: Principal, payer: str, micro_cents: int, name: str
    ) -> meter_pb2.Wallet:
        """Add money to an org's wallet once per name; a repeat answers the wallet."""
        org = payer or principal.org
        if not ORG_PATTERN.match(org):
            raise errors.ValidationError("payer", "must be an org id")
        if not NAME.match(name):
            raise errors.ValidationError(
                "name", "must be 1-128 letters, digits, dots, dashes, colons"
            )
        if not 0 < micro_cents <= MAX_CREDIT:
            raise errors.ValidationError("micro_cents", "must be above 0 and at most $1,000,000")

        def work() -> meter_pb2.Wallet:
            now = self._now()
            with self._store.unit() as session:
                row = ledger.wallet(session, org, free_cents=self._policy.free_cents, now=now)
                if ledger.post(session, row, f"credit/{name}", "credit", micro_cents, now=now):
                    audit.record(
                        session,
                        "training.wallet.credited",
                        org=org,
                        subject=name,
                        actor=principal.key_id,
                        micro_cents=micro_cents,
                    )
                return self._wallet_proto(session, org, now)

        return retrying(work)

    def set_cap(self, principal: Principal, project: str, micro_cents: int) -> meter_pb2.Wallet:
        if project and not ORG_PATTERN.match(project):
            raise errors.ValidationError("project", "must be a project name")
        if not 0 <= micro_cents <= MAX_CREDIT:
            raise errors.ValidationError("micro_cents", "must be between 0 and $1,000,000")

        def work() -> meter_pb2.Wallet:
            now = self._now()
            org = principal.org
            with self._store.unit() as session:
                row = ledger.wallet(session, org, free_cents=self._policy.free_cents, now=now)
                if not project:
                    row.spend_cap = micro_cents
                else:
                    cap = session.get(SpendCapRow, (org, project))
                    if cap is None and micro_cents:
                        session.add(SpendCapRow(org=org, project=project, micro_cents=micro_cents))
                    elif cap is not None and micro_cents:
                        cap.micro_cents = micro_cents
                    elif cap is not None:
                        session.delete(cap)
                audit.record(
                    session,
                    "training.wallet.capped",
                    org=org,
                    subject=project or org,
                    actor=principal.key_id,
                    micro_cents=micro_cents,
                )
                session.flush()
                return self._wallet_proto(session, org, now)

        return retrying(work)

    # -- the ledger ------------------------------------------------------------------------

    def entries(
        self, principal: Principal, *, size: int, token: str
    ) -> tuple[list[meter_pb2.LedgerEntry], str]:
        """A page of the org's entries, newest first, and the next page's token."""
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListLedgerEntries"}
        position = self._tokens.decode(token, scope)
        if token and position is None:
            raise errors.ValidationError("page_token", "is not a token this list issued")
        query = sa.select(EntryRow).where(EntryRow.org == principal.org)
        if principal.projects:  # a key limited to projects sees their charges, and the org's
            query = query.where(EntryRow.project.in_(("", *principal.projects)))
        if position:
            query = query.where(EntryRow.id < int(position["before"]))
        with self._store.unit(write=False) as session:
            rows = list(session.scalars(query.order_by(EntryRow.id.desc()).limit(limit + 1)))
            more, rows = len(rows) > limit, rows[:limit]
            following = self._tokens.encode({"before": rows[-1].id}, scope) if more else ""
            return [_entry(principal.org, r) for r in rows], following

    # -- storage ---------------------------------------------------------------------------

    def sweep_storage(self) -> tuple[int, int]:
        """Accrue every payer's storage through now, each in its own transaction; the
        payers charged and the micro-cents charged in all."""
        with self._store.unit(write=False) as session:
            orgs = storage.payers(session)
        charged = total = 0
        for org in orgs:

            def work(org: str = org) -> int:
                with self._store.unit() as session:
                    return storage.accrue(session, self._policy, org, self._now())

            amount = retrying(work)
            charged, total = charged + (amount > 0), total + amount
        return charged, total

    # -- prices ----------------------------------------------------------------------------

    def price(
        self, base: str, device_class: str, seconds: float, platform: bool
    ) -> tuple[int, meter_pb2.Rate]:
        if self._catalog.get(base) is None:
            raise errors.ValidationError("base_model", "is not a base of this deployment")
        if device_class not in ("cpu", "gpu"):
            raise errors.ValidationError(
                "device_class", "must be cpu or gpu", metadata={"supported": "cpu,gpu"}
            )
        if not 0 <= seconds <= 2**31:
            raise errors.ValidationError("device_seconds", "must be between 0 and 2^31")
        meter = rates.compute_meter(base, "cpu" if device_class == "cpu" else "cuda")
        with self._store.unit(write=False) as session:
            rate = self._rate(session, meter)
        amount = rates.cost(int(seconds + 0.999999), rate.micro_cents) if platform else 0
        return amount, rate


def _entry(org: str, row: EntryRow) -> meter_pb2.LedgerEntry:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(row.create_time)
    return meter_pb2.LedgerEntry(
        name=row.name,
        payer=org,
        kind=row.kind,
        micro_cents=row.micro_cents,
        job_id=row.job_id,
        quantity=row.quantity,
        create_time=stamp,
        task_id=row.task_id,
        project=row.project,
        span=row.span,
    )
