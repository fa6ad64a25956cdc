"""Tables JobService owns beside the shared ones: idempotency keys."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from services.core.store import Base, UtcDateTime


class IdempotencyKey(Base):
    """A key used on a method in an org, with the shape it was first used with."""

    __tablename__ = "idempotency_keys"

    org: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    method: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    request_sha256: Mapped[str] = mapped_column(sa.String(64))
    resource_id: Mapped[str] = mapped_column(sa.String(32))
    create_time: Mapped[dt.datetime] = mapped_column(UtcDateTime())
