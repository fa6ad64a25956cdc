"""The reads of ArtifactService: an object (GetArtifact), the org's objects a page at a
time (ListArtifacts), the objects a job produced (ListJobArtifacts), an object's
plaintext (ReadArtifact) and the bytes behind a download URL (DownloadArtifact). Retention
is evaluated on read: an expired object answers as unknown. Nothing here writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

from google.protobuf import timestamp_pb2
from sqlalchemy.orm import Session

from services.artifacts import store
from services.artifacts.crypto import OrgKeys
from services.artifacts.downloads import DOWNLOAD_SECONDS, DownloadTokens, Ticket
from services.artifacts.objects import ObjectStore
from services.core import errors
from services.core.auth import Principal
from services.core.money import storage
from services.core.object_tables import ObjectRow, fate, published, readable
from services.core.pagetoken import PageTokens, page_size
from services.core.states import ObjectStatus
from services.core.store import Store
from trainyard.artifact.v1 import artifact_pb2


def _ts(value: dt.datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


class ArtifactReads:
    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        keys: OrgKeys,
        tokens: PageTokens,
        downloads: DownloadTokens,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self._store = store
        self._objects = objects
        self._keys = keys
        self._tokens = tokens
        self._downloads = downloads
        self._now = clock

    def proto(self, session: Session, row: ObjectRow, *, with_url: bool) -> artifact_pb2.Artifact:
        """The object as answered: whether it will expire and why not, what it costs a
        month; `with_url` adds a download URL that expires."""
        if "storage_rate" not in session.info:  # read once a unit, not once an object
            session.info["storage_rate"] = storage.storage_rate(session)
        kept = fate(session, row, self._now())
        out = artifact_pb2.Artifact(
            sha256=row.sha256,
            size=row.size,
            kind=row.kind,
            name=row.name,
            status=row.status,
            job_id=row.job_id,
            published=published(session, row.org, row.sha256),
            retention_policy=row.retention_policy,
            meta=row.meta or {},
            create_time=_ts(row.stored_time or row.create_time),
            pinned=row.pinned,
        )
        if row.status == ObjectStatus.STORED:
            out.storage_cost_per_month = storage.month_cents(row.size, session.info["storage_rate"])
        if kept.expire_time is not None:
            out.expire_time.CopyFrom(_ts(kept.expire_time))
            out.expires_at.CopyFrom(out.expire_time)
        if kept.kept_by:
            out.kept_by = kept.kept_by
        if with_url:
            expires = int(self._now().timestamp()) + DOWNLOAD_SECONDS
            out.url = self._downloads.url(Ticket(row.org, row.sha256, expires))
            out.expires = expires
        return out

    def describe(
        self, principal: Principal, sha256: str, *, with_url: bool = True
    ) -> artifact_pb2.Artifact:
        with self._store.unit(write=False) as session:
            row = store.visible_object(session, principal.org, sha256, self._now())
            return self.proto(session, row, with_url=with_url)

    def list_objects(
        self, principal: Principal, *, kind: str, size: int, token: str
    ) -> tuple[list[artifact_pb2.Artifact], str, int]:
        """A page of the org's stored objects, newest first; the next page's token and the
        total."""
        kinds = (*store.USER_KINDS, *store.JOB_KINDS)
        if kind and kind not in kinds:
            raise errors.ValidationError(
                "kind", "is not one of the accepted values", metadata={"supported": ",".join(kinds)}
            )
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListArtifacts", "kind": kind}
        position = self._tokens.decode(token, scope)
        with self._store.unit(write=False) as session:
            rows = [
                r
                for r in store.stored_objects(session, principal.org, kind)
                if readable(session, r, self._now())
            ]
            start = 0
            if position:
                start = next(
                    (i + 1 for i, r in enumerate(rows) if r.sha256 == position.get("after")),
                    len(rows),
                )
            page = rows[start : start + limit]
            token_out = ""
            if start + limit < len(rows):
                token_out = self._tokens.encode({"after": page[-1].sha256}, scope)
            return [self.proto(session, r, with_url=False) for r in page], token_out, len(rows)

    def list_job_artifacts(self, principal: Principal, job_id: str) -> list[artifact_pb2.Artifact]:
        """The objects the job produced, oldest first, each under the kind and name the job
        gave it, with a download URL."""
        with self._store.unit(write=False) as session:
            store.owned_producer(session, principal.org, job_id)
            out = []
            for link in store.job_links(session, principal.org, job_id):
                row = store.object_row(session, principal.org, link.sha256)
                if readable(session, row, self._now()):
                    assert row is not None
                    item = self.proto(session, row, with_url=True)
                    item.kind, item.name, item.job_id = link.kind, link.name, job_id
                    item.provenance_record_id = link.provenance_record_id
                    out.append(item)
            return out

    def job_artifact(self, org: str, job_id: str, sha256: str) -> artifact_pb2.Artifact:
        """One object of the job's, as ListJobArtifacts answers it."""
        principal = Principal(key_id="", org=org, role="platform")
        for item in self.list_job_artifacts(principal, job_id):
            if item.sha256 == sha256:
                return item
        raise errors.NotFound()

    def read(self, principal: Principal, sha256: str) -> Iterator[bytes]:
        """An object's plaintext, for the services that need its rows."""
        with self._store.unit(write=False) as session:
            row = store.visible_object(session, principal.org, sha256, self._now())
            key = self._keys.object_key(session, row.org, sha256)
        return self._objects.stream(principal.org, sha256, key)

    def download(self, token: str) -> Iterator[bytes]:
        """The plaintext behind a download URL: the token names the org and the object,
        which must still be readable (an object deleted or expired since answers as
        unknown)."""
        ticket = self._downloads.open(token, int(self._now().timestamp()))
        with self._store.unit(write=False) as session:
            store.visible_object(session, ticket.org, ticket.sha256, self._now())
            key = self._keys.object_key(session, ticket.org, ticket.sha256)
        return self._objects.stream(ticket.org, ticket.sha256, key)
