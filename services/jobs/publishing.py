"""Publishing (HIP-1333 §6): PublishJob puts a succeeded job's output (a rejected one's
with `force`) under a name of its org, a capability with the route of the questions it
answers; ListPublished answers every org's published capabilities to the platform, named
by a revision, each with a download URL ArtifactService signs. A publication keeps its
object: ArtifactService reads the same table before it deletes anything."""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from services.core import audit, errors
from services.core.auth import Principal
from services.core.object_tables import PublicationRow, readable
from services.core.states import JobStatus
from services.core.store import Store, retrying, utcnow
from services.core.tables import JobRow
from services.core.validation import NAME, SHA256, check_identifier
from services.core.view import ts
from services.jobs import store
from trainyard.artifact.v1 import artifact_pb2
from trainyard.job.v1 import job_service_pb2, publication_pb2

log = logging.getLogger(__name__)

CAPABILITY = "capability"
ROUTE_TYPES = ("choice", "score", "noul")
MAX_KEYS = 64
MAX_LABELS = 256
MAX_TEXT_BYTES = 256

# A question a route claims: a whole key (`("key", k)`), or one question under it
# (`("question", k, type, labels)`).
Claim = tuple[Any, ...]


class Downloads(Protocol):
    """Who makes a published object's download URL: ArtifactService, which holds the orgs'
    keys and seals the URL's token (`services.core.clients.ArtifactReader`)."""

    def describe(self, org: str, sha256: str) -> artifact_pb2.Artifact: ...


# -- the route ----------------------------------------------------------------------------


def _text(value: str) -> bool:
    """1 to 256 bytes with no control characters."""
    return 1 <= len(value.encode()) <= MAX_TEXT_BYTES and not any(
        unicodedata.category(c) == "Cc" for c in value
    )


def check_route(route: publication_pb2.Route) -> dict[str, Any]:
    """The route as a publication keeps it, or a field violation naming `route.keys` or
    `route.options`, never a value."""
    keys = list(route.keys)
    if not 1 <= len(keys) <= MAX_KEYS:
        raise errors.ValidationError("route.keys", f"must hold 1 to {MAX_KEYS} question keys")
    if not all(_text(k) for k in keys):
        raise errors.ValidationError(
            "route.keys", f"must each be 1 to {MAX_TEXT_BYTES} bytes without control characters"
        )
    if len(set(keys)) != len(keys):
        raise errors.ValidationError("route.keys", "must not name a key twice")
    options: dict[str, dict[str, Any]] = {}
    for key in sorted(route.options):
        option = route.options[key]
        labels = list(option.labels)
        if key not in keys:
            raise errors.ValidationError("route.options", "may narrow only a key the route answers")
        if option.type not in ROUTE_TYPES:
            raise errors.ValidationError(
                "route.options",
                "must each have a type of choice, score or noul",
                metadata={"supported": ",".join(ROUTE_TYPES)},
            )
        if not 1 <= len(labels) <= MAX_LABELS:
            raise errors.ValidationError(
                "route.options", f"must each name 1 to {MAX_LABELS} labels"
            )
        if not all(_text(label) for label in labels):
            raise errors.ValidationError(
                "route.options",
                f"labels must each be 1 to {MAX_TEXT_BYTES} bytes without control characters",
            )
        if len(set(labels)) != len(labels):
            raise errors.ValidationError("route.options", "must not name a label twice")
        options[key] = {"type": option.type, "labels": labels}
    return {"keys": keys, "options": options}


def claims(route: dict[str, Any]) -> set[Claim]:
    """The questions a route claims: each key with no options whole, and each narrowed
    key's one question (its type and labels, in order)."""
    options = route.get("options") or {}
    found: set[Claim] = set()
    for key in route.get("keys") or ():
        if key in options:
            found.add(("question", key, options[key]["type"], tuple(options[key]["labels"])))
        else:
            found.add(("key", key))
    return found


def route_proto(route: dict[str, Any]) -> publication_pb2.Route:
    out = publication_pb2.Route(keys=route.get("keys") or [])
    for key, option in (route.get("options") or {}).items():
        out.options[key].CopyFrom(
            publication_pb2.RouteOption(type=option["type"], labels=option["labels"])
        )
    return out


# -- the records --------------------------------------------------------------------------


def form_of(job: JobRow) -> str:
    """How a capability is served: `head` for a readout, which applies over the frozen
    base and shares its encoder; `full` for every other adaptation. Not `capability.json`'s
    `form`, which says how the tensors are encoded."""
    return "head" if job.frozen().adaptation.mode == "readout" else "full"


def publication_proto(row: PublicationRow) -> publication_pb2.Publication:
    out = publication_pb2.Publication(
        org=row.org,
        name=row.name,
        job_id=row.job_id,
        sha256=row.sha256,
        base_sha256=row.base_sha256,
        form=row.form,
        forced=row.forced,
        publish_time=ts(row.publish_time),
    )
    if row.route is not None:
        out.route.CopyFrom(route_proto(row.route))
    return out


def revision_of(rows: Iterable[PublicationRow]) -> str:
    """The list's name: a sha256 over each publication's identity (org, name, object,
    base, form, route), sorted here rather than by the database's collation. It moves
    when a capability is published, replaced or moved to another name, and at nothing
    else: publishing the same again keeps it."""
    identity = [
        [r.org, r.name, r.sha256, r.base_sha256, r.form, r.route or {}]
        for r in sorted(rows, key=lambda r: (r.org, r.name))
    ]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class Publishing:
    def __init__(self, store: Store, downloads: Downloads | None = None) -> None:
        self._store = store
        self._downloads = downloads

    def publish(
        self,
        principal: Principal,
        job_id: str,
        *,
        name: str,
        force: bool,
        route: publication_pb2.Route | None,
        request_id: str = "",
    ) -> publication_pb2.Publication:
        """The publication as recorded. Each publish of a job the org has is on the audit
        trail, a refusal too (then raised)."""
        if name:
            check_identifier("name", name, NAME, "a name of letters, digits, dots, dashes")
        asked = check_route(route) if route is not None else None

        def work() -> tuple[publication_pb2.Publication | None, errors.DomainError | None]:
            with self._store.unit() as session:
                store.lock_publications(session, principal.org)
                job = store.owned_job(session, principal.org, job_id, lock=True)
                try:
                    row, replaced = _record(session, job, name, force, asked)
                except errors.DomainError as exc:
                    audit.record(
                        session,
                        "training.job.publish.rejected",
                        org=job.org,
                        subject=job.id,
                        code=exc.reason,
                        actor=principal.key_id,
                        request_id=request_id,
                    )
                    return None, exc
                audit.record(
                    session,
                    "training.job.publish.accepted",
                    org=job.org,
                    subject=job.id,
                    code="forced" if row.forced else "",
                    actor=principal.key_id,
                    request_id=request_id,
                    kind=row.kind,
                    replaced=replaced,
                )
                return publication_proto(row), None

        published, refusal = retrying(work)
        if refusal is not None:
            raise refusal
        assert published is not None
        return published

    def list_published(
        self, principal: Principal, revision: str
    ) -> job_service_pb2.ListPublishedResponse:
        """Every org's published capabilities, or `changed: false` and nothing while
        `revision` is current. A store that cannot be read fails the answer (UNAVAILABLE)
        rather than reading as having published nothing."""
        if not principal.is_platform:
            raise errors.PermissionDenied()
        if revision and not SHA256.match(revision):
            raise errors.ValidationError("revision", "must be a revision this list answered")
        try:
            with self._store.unit(write=False) as session:
                rows = store.every_capability(session)
                current = revision_of(rows)
                data = [(r.org, r.sha256, publication_proto(r)) for r in rows]
        except SQLAlchemyError:
            log.exception("the publications cannot be read")
            raise errors.Unavailable() from None
        if revision == current:
            return job_service_pb2.ListPublishedResponse(revision=current, changed=False)
        if data and self._downloads is None:
            raise errors.Unavailable()
        for org, sha256, item in data:
            assert self._downloads is not None
            got = self._downloads.describe(org, sha256)
            item.url, item.expires = got.url, got.expires
        return job_service_pb2.ListPublishedResponse(
            revision=current, changed=True, data=[item for _, _, item in data]
        )


def _record(
    session: Session, job: JobRow, name: str, force: bool, route: dict[str, Any] | None
) -> tuple[PublicationRow, bool]:
    """Check the publish against the job and the org's publications, then write it;
    answers the row and whether it replaced one of the same name."""
    result = job.result or {}
    spec = job.frozen()
    kind = str(result.get("kind") or spec.output.kind)
    if kind == CAPABILITY and route is None:
        raise errors.ValidationError(
            "route.keys", "is required for a capability: the question keys it answers"
        )
    if kind != CAPABILITY and route is not None:
        raise errors.ValidationError("route", "is only for a capability output")
    if job.status == JobStatus.REJECTED:
        if not force:
            raise errors.InvalidTransition("A rejected job's output is published only with force.")
    elif job.status != JobStatus.SUCCEEDED:
        raise errors.InvalidTransition(
            "Only a succeeded job's output is published, or a rejected one's with force."
        )
    sha256 = str(result.get("sha256", ""))
    kept = store.lock_object(session, job.org, sha256) if sha256 and not job.deleted else None
    if not readable(session, kept, utcnow()):
        raise errors.InvalidTransition("The job holds no output to publish: none was kept.")
    name = name or spec.output.name or str(result.get("name", ""))
    if not name:
        raise errors.ValidationError("name", "is required: the job's output has no name")
    if route is not None:
        _check_conflict(store.capabilities_of(session, job.org), name, route)
    row = store.publication(session, job.org, name)
    replaced = row is not None
    if row is None:
        row = PublicationRow(org=job.org, name=name)
        session.add(row)
    row.job_id, row.sha256, row.kind = job.id, sha256, kind
    row.base_sha256 = str(result.get("base_sha256", ""))
    row.form, row.route = form_of(job), route
    row.forced = job.status == JobStatus.REJECTED
    row.publish_time = utcnow()
    return row, replaced


def _check_conflict(published: Sequence[PublicationRow], name: str, route: dict[str, Any]) -> None:
    """Two capabilities of one org may not claim one question: both on a key with no
    options, or both naming the same question under it. The one published under the same
    name is being replaced, so it claims nothing."""
    mine = claims(route)
    for other in published:
        if other.name != name and mine & claims(other.route or {}):
            raise errors.AlreadyExists(
                "Another published capability of the org claims a question of this route.",
                reason="ROUTE_CONFLICT",
                metadata={"publication": other.name},
            )
