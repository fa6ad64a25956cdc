"""PinArtifact, UnpinArtifact, ExtendArtifact: what the org does to keep an object longer.
Each changes the object's row alone (its pin, its expiry), never its bytes, and is on the
audit trail in the same transaction. A pinned object never expires; an extension moves
its expiry later, within its retention class's greatest TTL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from sqlalchemy.orm import Session

from services.artifacts import store
from services.artifacts.reads import ArtifactReads
from services.core import audit, errors, retention
from services.core.auth import Principal
from services.core.object_tables import ObjectRow, readable
from services.core.store import Store
from trainyard.artifact.v1 import artifact_pb2


def greatest_ttl(policy: str) -> int:
    """The most seconds an object of a retention class may be kept for from now; an
    upload's (`default`) is the default class's."""
    return retention.CLASSES.get(policy, retention.CLASSES[retention.DEFAULT_CLASS])[1]


def extended_expiry(row: ObjectRow, ttl_seconds: int, now: dt.datetime) -> dt.datetime:
    """When the object expires once extended by `ttl_seconds` from `now`: never earlier
    than it would already, nor past its class's greatest TTL (each refused naming
    `ttl_seconds`)."""
    most = greatest_ttl(row.retention_policy)
    if ttl_seconds <= 0:
        raise errors.ValidationError("ttl_seconds", "must be at least 1")
    if ttl_seconds > most:
        raise errors.ValidationError(
            "ttl_seconds",
            "is longer than its retention class keeps an object",
            metadata={"max": str(most)},
        )
    later = now + dt.timedelta(seconds=ttl_seconds)
    if row.expires_at is None or later < row.expires_at:
        # An object that never expires, or expires later, would be kept for less.
        raise errors.ValidationError(
            "ttl_seconds", "would make the object expire sooner than it does"
        )
    return later


class Keeping:
    def __init__(
        self, store: Store, reads: ArtifactReads, clock: Callable[[], dt.datetime]
    ) -> None:
        self._store = store
        self._reads = reads
        self._now = clock

    def pin(
        self, principal: Principal, sha256: str, *, request_id: str = ""
    ) -> artifact_pb2.Artifact:
        return self._set_pin(principal, sha256, True, request_id)

    def unpin(
        self, principal: Principal, sha256: str, *, request_id: str = ""
    ) -> artifact_pb2.Artifact:
        return self._set_pin(principal, sha256, False, request_id)

    def _set_pin(
        self, principal: Principal, sha256: str, pinned: bool, request_id: str
    ) -> artifact_pb2.Artifact:
        """Pin or unpin a readable object of the org; a repeat changes nothing and is not
        audited again. An object retention has taken already answers as unknown; one
        unpinned past its expiry is answered once more, then reads as gone."""

        def work() -> artifact_pb2.Artifact:
            with self._store.unit() as session:
                row = self._readable(session, principal.org, sha256)
                if row.pinned != pinned:
                    row.pinned = pinned
                    audit.record(
                        session,
                        "training.artifact.pinned" if pinned else "training.artifact.unpinned",
                        org=principal.org,
                        subject=row.id,
                        actor=principal.key_id,
                        request_id=request_id,
                    )
                return self._reads.proto(session, row, with_url=False)

        return store.retry(work)

    def extend(
        self, principal: Principal, sha256: str, ttl_seconds: int, *, request_id: str = ""
    ) -> artifact_pb2.Artifact:
        """The object now expires `ttl_seconds` from now (see `extended_expiry`)."""

        def work() -> artifact_pb2.Artifact:
            with self._store.unit() as session:
                row = self._readable(session, principal.org, sha256)
                row.expires_at = extended_expiry(row, ttl_seconds, self._now())
                audit.record(
                    session,
                    "training.artifact.extended",
                    org=principal.org,
                    subject=row.id,
                    actor=principal.key_id,
                    request_id=request_id,
                    ttl_seconds=ttl_seconds,
                )
                return self._reads.proto(session, row, with_url=False)

        return store.retry(work)

    def _readable(self, session: Session, org: str, sha256: str) -> ObjectRow:
        """The org's object, locked as a deletion and a publish lock it, if a read would
        find it; NOT_FOUND otherwise, as for another org's or anything not a hash."""
        if not store.is_sha256(sha256):
            raise errors.NotFound()
        row = store.object_row(session, org, sha256, lock=True)
        if row is None or not readable(session, row, self._now()):
            raise errors.NotFound()
        return row
