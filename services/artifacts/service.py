"""ArtifactService's use cases, one module each, grouped so the servicer and the server's
sweep loop hold one handle; `server.py` builds them:

    grants.py              CreateArtifact, GrantJobArtifact (grants, the pending limit,
                           a job named on bytes the org holds); ConfirmArtifact,
                           ConfirmJobArtifact (read-back, mismatched bytes deleted)
    reads.py               GetArtifact, ListArtifacts, ListJobArtifacts, ReadArtifact
    provenance_records.py  RecordProvenance, GetJobProvenance (the record's form:
                           provenance.py)
    deletion.py            DeleteArtifact, DeleteJobArtifact (the cascade), SweepArtifacts
                           (the retention sweep)
    keeping.py             PinArtifact, UnpinArtifact, ExtendArtifact (an object kept
                           longer; its bytes untouched)
    retention.py           how long objects are kept, from the job's frozen spec
    crypto.py              org data keys and each object's SSE-C key
    objects.py             the S3 store: presigned transfers, read-back, deletion
    store.py               the tables and every query

No gRPC here."""

from __future__ import annotations

import dataclasses

from services.artifacts.deletion import Deletion
from services.artifacts.grants import Grants
from services.artifacts.keeping import Keeping
from services.artifacts.provenance_records import ProvenanceRecords
from services.artifacts.reads import ArtifactReads


@dataclasses.dataclass(frozen=True)
class ArtifactService:
    grants: Grants
    reads: ArtifactReads
    provenance: ProvenanceRecords
    deletion: Deletion
    keeping: Keeping
