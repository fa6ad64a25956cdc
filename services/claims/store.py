"""Tables ClaimService owns beside the lifecycle's tasks: the executors it has seen."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from services.core.store import Base, UtcDateTime


class ExecutorRow(Base):
    """An executor that said hello: where it runs and what it can train."""

    __tablename__ = "executors"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    org: Mapped[str] = mapped_column(sa.String(63))
    key_id: Mapped[str] = mapped_column(sa.String(32))
    machine: Mapped[str] = mapped_column(sa.String(63))
    platform: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    offer: Mapped[dict[str, Any]] = mapped_column(sa.JSON())
    connected: Mapped[bool] = mapped_column(sa.Boolean(), default=False)
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    last_seen: Mapped[dt.datetime] = mapped_column(UtcDateTime())
