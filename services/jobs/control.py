"""The owner's controls of a job that exists: cancel it, or retry one that failed or was
cancelled as a new attempt (`002_…` "Cancelamento", "Retry explícito"). The moves
themselves are `lifecycle.cancel` and `lifecycle.requeue`."""

from __future__ import annotations

from services.core import audit, errors, lifecycle
from services.core.auth import Principal
from services.core.config import Config
from services.core.states import RETRYABLE
from services.core.store import Store, retrying
from services.core.validation import IDEMPOTENCY_KEY, check_identifier
from services.jobs import store, view
from services.jobs.create import check_queue
from trainyard.job.v1 import attempt_pb2, job_pb2
from trainyard.training.catalog import Catalog


class JobControl:
    def __init__(self, store: Store, config: Config, catalog: Catalog) -> None:
        self._store = store
        self._config = config
        self._catalog = catalog

    def cancel(self, principal: Principal, job_id: str, *, request_id: str = "") -> job_pb2.Job:
        """The job as the cancel left it. A refusal is recorded, then raised."""

        def work() -> tuple[job_pb2.Job, errors.DomainError | None]:
            with self._store.unit() as session:
                row = store.owned_job(session, principal.org, job_id, lock=True)
                refusal: errors.DomainError | None = None
                try:
                    lifecycle.cancel(session, row, actor=principal.key_id, request_id=request_id)
                except errors.DomainError as exc:
                    refusal = exc
                name = "training.job.cancel.rejected" if refusal else "training.job.cancel.accepted"
                audit.record(
                    session,
                    name,
                    org=row.org,
                    subject=row.id,
                    code=refusal.reason if refusal else "",
                    actor=principal.key_id,
                    request_id=request_id,
                )
                return view.job_proto(session, row, self._catalog), refusal

        job, refusal = retrying(work)
        if refusal:
            raise refusal
        return job

    def retry(
        self, principal: Principal, job_id: str, *, key: str, resume: bool, request_id: str = ""
    ) -> tuple[job_pb2.Job, attempt_pb2.Attempt]:
        """The job and its new attempt; the same key again answers the attempt it started."""
        if not key:
            raise errors.ValidationError(
                "idempotency_key", "is required (or the Idempotency-Key header)"
            )
        check_identifier("idempotency_key", key, IDEMPOTENCY_KEY, "a safe identifier")

        def work() -> tuple[job_pb2.Job, attempt_pb2.Attempt]:
            with self._store.unit() as session:
                store.lock_org(session, principal.org)
                row = store.owned_job(session, principal.org, job_id, lock=True)
                earlier = store.attempt_by_key(session, row.id, key)
                if earlier is not None:
                    if earlier.resume_from_checkpoint != resume:
                        raise errors.AlreadyExists(
                            "The idempotency key was used with another request.",
                            reason="IDEMPOTENCY_KEY_REUSED",
                            metadata={"field": "idempotency_key"},
                        )
                    return view.job_proto(session, row, self._catalog), view.attempt_proto(earlier)
                if row.status not in RETRYABLE or row.deleted:
                    raise errors.InvalidTransition("Only a failed or cancelled job can be retried.")
                result = row.result or {}
                if resume and not result.get("checkpoint_sha256", ""):
                    raise errors.FailedPrecondition(
                        "The job has no verified checkpoint to resume from.",
                        reason="CHECKPOINT_UNAVAILABLE",
                    )
                if row.planned().projected_seconds > self._config.execution_limit_seconds:
                    raise errors.FailedPrecondition(
                        "The projected run exceeds the execution limit.",
                        reason="TRAINING_DURATION_EXCEEDS_LIMIT",
                    )
                check_queue(store.open_jobs(session, principal.org), self._config)
                attempt = store.add_attempt(
                    session,
                    row,
                    key=key,
                    resume=resume,
                    resume_step=int(result.get("checkpoint_step", 0)) if resume else None,
                )
                lifecycle.requeue(session, row, attempt, actor=principal.key_id)
                return view.job_proto(session, row, self._catalog), view.attempt_proto(attempt)

        return retrying(work)
