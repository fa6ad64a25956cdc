"""ArtifactService's logic behind one door, for the servicer, the server's sweep loop and
tests. Each use case lives in its own module; a method here only hands over:

    grants.py              CreateArtifact, GrantJobArtifact (grants, the pending limit,
                           a job named on bytes the org holds); ConfirmArtifact,
                           ConfirmJobArtifact (read-back, mismatched bytes deleted)
    reads.py               GetArtifact, ListArtifacts, ListJobArtifacts, ReadArtifact
    provenance_records.py  RecordProvenance, GetJobProvenance (the record's form:
                           provenance.py)
    deletion.py            DeleteArtifact, DeleteJobArtifact (the cascade), SweepArtifacts
                           (the retention sweep)
    retention.py           how long objects are kept, from the job's frozen spec
    crypto.py              org data keys and each object's SSE-C key
    objects.py             the S3 store: presigned transfers, read-back, deletion
    store.py               the tables and every query

No gRPC here."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping

from services.artifacts.crypto import KeyWrap, OrgKeys
from services.artifacts.deletion import Deletion
from services.artifacts.grants import Grants
from services.artifacts.objects import ObjectStore
from services.artifacts.provenance_records import ProvenanceRecords
from services.artifacts.reads import ArtifactReads
from services.core.auth import Principal
from services.core.config import Config
from services.core.pagetoken import PageTokens
from services.core.store import Store, utcnow
from trainyard.artifact.v1 import artifact_pb2, artifact_service_pb2, provenance_pb2


class ArtifactService:
    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        wrap: KeyWrap,
        config: Config,
        tokens: PageTokens,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        keys = OrgKeys(wrap, clock)
        self.reads = ArtifactReads(store, objects, keys, tokens, clock)
        self.grants = Grants(store, objects, keys, config, self.reads, clock)
        self.provenance = ProvenanceRecords(store, clock)
        self.deletion = Deletion(store, objects, keys, clock)

    # -- grants.py -----------------------------------------------------------------------------

    def grant(
        self,
        principal: Principal,
        *,
        kind: str,
        name: str,
        sha256: str,
        size: int,
        job_id: str = "",
        meta: Mapping[str, str] | None = None,
        request_id: str = "",
    ) -> artifact_pb2.Grant:
        return self.grants.grant(
            principal, kind=kind, name=name, sha256=sha256, size=size, job_id=job_id, meta=meta,
            request_id=request_id,
        )  # fmt: skip

    def confirm(
        self, principal: Principal, sha256: str, *, job_id: str = ""
    ) -> artifact_pb2.Artifact:
        return self.grants.confirm(principal, sha256, job_id=job_id)

    # -- reads.py ------------------------------------------------------------------------------

    def describe(
        self, principal: Principal, sha256: str, *, with_url: bool = True
    ) -> artifact_pb2.Artifact:
        return self.reads.describe(principal, sha256, with_url=with_url)

    def list_objects(
        self, principal: Principal, *, kind: str, size: int, token: str
    ) -> tuple[list[artifact_pb2.Artifact], str, int]:
        return self.reads.list_objects(principal, kind=kind, size=size, token=token)

    def list_job_artifacts(self, principal: Principal, job_id: str) -> list[artifact_pb2.Artifact]:
        return self.reads.list_job_artifacts(principal, job_id)

    def read(self, principal: Principal, sha256: str) -> Iterator[bytes]:
        return self.reads.read(principal, sha256)

    # -- provenance_records.py -----------------------------------------------------------------

    def record_provenance(
        self, principal: Principal, record: provenance_pb2.ProvenanceRecord
    ) -> provenance_pb2.ProvenanceRecord:
        return self.provenance.record(principal, record)

    def job_provenance(self, principal: Principal, job_id: str) -> provenance_pb2.ProvenanceRecord:
        return self.provenance.of_job(principal, job_id)

    # -- deletion.py ---------------------------------------------------------------------------

    def delete(
        self, principal: Principal, sha256: str, *, job_id: str = "", request_id: str = ""
    ) -> list[artifact_service_pb2.Cascaded]:
        return self.deletion.delete(principal, sha256, job_id=job_id, request_id=request_id)

    def sweep(self) -> tuple[int, int]:
        return self.deletion.sweep()
