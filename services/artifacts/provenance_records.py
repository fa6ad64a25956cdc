"""RecordProvenance and GetJobProvenance: the one provenance record a completed job emits
(`001_…`), in the form `provenance.py` checks, tied to the artifact the job produced."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from services.artifacts import provenance, store
from services.artifacts.store import ProvenanceRow
from services.core import audit, errors, ids
from services.core.auth import Principal
from services.core.object_tables import readable
from services.core.store import Store
from trainyard.artifact.v1 import provenance_pb2


class ProvenanceRecords:
    def __init__(self, store: Store, clock: Callable[[], dt.datetime]) -> None:
        self._store = store
        self._now = clock

    def record(
        self, principal: Principal, record: provenance_pb2.ProvenanceRecord
    ) -> provenance_pb2.ProvenanceRecord:
        """Record the job's provenance once; a repeat answers the record made first."""

        def work() -> provenance_pb2.ProvenanceRecord:
            with self._store.unit() as session:
                job = store.owned_job(session, principal.org, record.job_id)
                existing = store.provenance_of(session, job.id)
                if existing is not None:
                    return _proto(existing)
                link = store.job_link(session, principal.org, job.id, record.artifact_sha256)
                if link is None:
                    raise errors.ValidationError(
                        "record.artifact_sha256", "is not an artifact of the job"
                    )
                values = {
                    "id": ids.new_id("prv"),
                    "job_id": job.id,
                    "dataset_sha256": record.dataset_sha256,
                    "artifact_sha256": record.artifact_sha256,
                    "base_model_id": record.base_model_id,
                    "base_model_sha256": record.base_model_sha256,
                    "training_config_sha256": record.training_config_sha256,
                    "created_at": provenance.utc_now_text(),
                    "schema_version": provenance.SCHEMA_VERSION,
                }
                try:
                    provenance.validate_provenance_record(values)
                except provenance.ProvenanceError as exc:
                    raise errors.ValidationError(
                        f"record.{exc.field}", "is not in its form"
                    ) from None
                row = store.add_provenance(session, principal.org, values)
                link.provenance_record_id = row.id
                audit.record(
                    session,
                    "training.artifact.provenance.recorded",
                    org=principal.org,
                    subject=job.id,
                    record=row.id,
                )
                return _proto(row)

        return store.retry(work)

    def of_job(self, principal: Principal, job_id: str) -> provenance_pb2.ProvenanceRecord:
        with self._store.unit(write=False) as session:
            job = store.owned_job(session, principal.org, job_id)
            row = store.provenance_of(session, job.id)
            if row is None:
                raise errors.NotFound()
            artifact = store.object_row(session, job.org, row.artifact_sha256)
            if not readable(session, artifact, self._now()):
                raise errors.NotFound()  # its artifact expired: evaluated on read
            return _proto(row)


def _proto(row: ProvenanceRow) -> provenance_pb2.ProvenanceRecord:
    return provenance_pb2.ProvenanceRecord(
        id=row.id,
        job_id=row.job_id,
        dataset_sha256=row.dataset_sha256,
        artifact_sha256=row.artifact_sha256,
        base_model_id=row.base_model_id,
        base_model_sha256=row.base_model_sha256,
        training_config_sha256=row.training_config_sha256,
        created_at=row.created_at,
        schema_version=row.schema_version,
    )
