"""GetLimits: what the org may hold and spend, and what it holds and spent now, each read
as the refusal past it reads it (`services.core.limits`, the queue limit, the money's
caps), with the calling key's own scope and spend."""

from __future__ import annotations

import sqlalchemy as sa

from services.core import limits
from services.core.auth import Principal
from services.core.config import Config
from services.core.money import ledger
from services.core.money.rates import MICRO_CENTS_PER_CENT
from services.core.money.tables import EntryRow, SpendCapRow, WalletRow
from services.core.store import Store, utcnow
from services.jobs import store as jobs_store
from services.jobs.org.keys import Keys
from trainyard.org.v1 import limits_pb2


def _cents(micro_cents: int) -> float:
    return micro_cents / MICRO_CENTS_PER_CENT


class OrgLimits:
    def __init__(self, store: Store, config: Config, keys: Keys) -> None:
        self._store = store
        self._config = config
        self._keys = keys

    def read(self, principal: Principal) -> limits_pb2.Limits:
        org, now = principal.org, utcnow()
        with self._store.unit(write=False) as session:
            active = jobs_store.open_jobs(session, org)
            clients = limits.live_clients(session, org)
            pending = limits.pending_bytes(session, org)
            wallet = session.get(WalletRow, org)
            cap = wallet.spend_cap if wallet is not None else 0
            spent = ledger.spent(session, org, now)
            caps = {
                row.project: row.micro_cents
                for row in session.scalars(sa.select(SpendCapRow).where(SpendCapRow.org == org))
            }
            by_project = {
                str(project): -int(total or 0)
                for project, total in session.execute(
                    sa.select(EntryRow.project, sa.func.sum(EntryRow.micro_cents))
                    .where(
                        EntryRow.org == org,
                        EntryRow.kind != "credit",
                        EntryRow.project != "",
                        EntryRow.create_time >= ledger.month_start(now),
                    )
                    .group_by(EntryRow.project)
                ).all()
            }
        answer = limits_pb2.Limits(
            active_jobs=limits_pb2.Usage(used=active, limit=self._config.queue_limit),
            training_clients=limits_pb2.Usage(used=clients, limit=self._config.train_clients),
            pending_uploads=limits_pb2.Usage(used=pending, limit=limits.PENDING_LIMIT_BYTES),
            spend_this_month=limits_pb2.Spend(used=_cents(spent)),
            key=self._keys.own(principal),
        )
        if cap:
            answer.spend_this_month.limit = _cents(cap)
        for project in sorted(caps.keys() | by_project.keys()):
            if not principal.sees_project(project):
                continue
            line = limits_pb2.ProjectSpend(project=project, used=_cents(by_project.get(project, 0)))
            if caps.get(project):
                line.limit = _cents(caps[project])
            answer.project_spend.append(line)
        return answer
