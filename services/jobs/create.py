"""Admission and create: a spec checked in HIP-1333 §3's order, expanded, planned and
admitted on its projected duration (an estimate stops there), then inserted once per
idempotency key with the project's next number (and, when its rows are built in code,
taken through preparation in the same transaction)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from services.core import adapters as stored_adapters
from services.core import audit, errors, ids, wakeups
from services.core import view as core_view
from services.core.auth import Principal
from services.core.config import Config
from services.core.money import rates, windows
from services.core.money.tables import holds_read
from services.core.store import Store, retrying, utcnow
from services.core.tables import JobRow
from services.core.validation import check_typed_job, parse_json_job
from services.jobs import adapters, expected, frozen, remote, sources, spec, store, view
from services.jobs.preparation import Preparation
from services.jobs.queue import QueueReader
from trainyard.job.v1 import job_pb2, job_service_pb2
from trainyard.training import datasets, planning
from trainyard.training.catalog import Base, Catalog

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Admission:
    """What a create of a spec would freeze and whether it may run."""

    job: job_pb2.Job
    base: Base
    plan: planning.Plan
    stats: datasets.Stats
    workload_seconds: float
    projected_seconds: float
    limit_seconds: float
    # Why the selection cannot train (an estimate's answer; a create refuses instead).
    untrainable: tuple[str, ...] = ()
    # The device-seconds loading the base and its first step take, by its profile.
    first_step_seconds: int = 0

    @property
    def admitted(self) -> bool:
        return self.projected_seconds <= self.limit_seconds

    @property
    def platform(self) -> bool:
        """Whether the platform's executor runs it (and charges its payer)."""
        return not self.job.resources.machines

    @property
    def meter(self) -> str:
        """The compute meter it is priced at: `cpu` when that is all it allows, else an
        accelerator's (HIP-1333 §10 Create)."""
        allowed = tuple(self.job.resources.devices) or self.base.devices
        return rates.compute_meter(self.base.name, windows.device_class(allowed))


def first_step_seconds(base: Base, job: job_pb2.Job) -> int:
    """The device-seconds a job needs to reach its first step: loading the base and one
    step, by the base profile's own duration model."""
    model = base.to_proto().profile.duration
    return math.ceil(planning.workload_seconds(model, 1, job.hyperparameters.max_seq_length))


def check_max_seconds(job: job_pb2.Job, first_step: int) -> None:
    """A `max_seconds` that ends the job before its first step is refused, not admitted."""
    if job.resources.HasField("max_seconds") and job.resources.max_seconds < first_step:
        raise errors.ValidationError(
            "resources.max_seconds",
            "is below the device-seconds loading the base and its first step take",
            metadata={"min": str(first_step)},
        )


def check_budget(admission: Admission, rate: int) -> None:
    """A budget that cannot pay for the first step at the job's rate is refused."""
    resources = admission.job.resources
    if not admission.platform or not resources.HasField("budget"):
        return
    needed = rates.cost(admission.first_step_seconds, rate)
    if resources.budget * rates.MICRO_CENTS_PER_CENT < needed:
        raise errors.ValidationError(
            "resources.budget",
            "is below the price of loading the base and its first step (US cents)",
            metadata={"min": str(math.ceil(needed / rates.MICRO_CENTS_PER_CENT))},
        )


def parse(body: Mapping[str, Any] | None, typed: job_pb2.Job) -> job_pb2.Job:
    """The request's job: a REST body parsed strictly, or the gRPC message checked."""
    if body is not None:
        return parse_json_job(body)
    check_typed_job(typed)
    return typed


def check_scope(principal: Principal, job: job_pb2.Job) -> None:
    """A key limited to projects or bases makes jobs (and estimates) of those only."""
    principal.check_project(job.project or spec.DEFAULT_PROJECT)
    principal.check_base(job.base_model)


def check_queue(open_jobs: int, config: Config) -> None:
    """JOB_LIMIT when the org already has its most jobs that have not ended."""
    if open_jobs >= config.queue_limit:
        raise errors.ResourceExhausted(
            "The org already has its most jobs that have not ended.",
            reason="JOB_LIMIT",
            metadata={"limit": str(config.queue_limit)},
        )


def _duration_error(admission: Admission) -> errors.DomainError:
    return errors.FailedPrecondition(
        "The projected run exceeds the execution limit.",
        reason="TRAINING_DURATION_EXCEEDS_LIMIT",
        metadata={
            "projected_seconds": f"{admission.projected_seconds:.0f}",
            "execution_limit_seconds": f"{admission.limit_seconds:.0f}",
        },
    )


class JobCreation:
    """EstimateJob and CreateJob. `admit` reads no store, so it also plans jobs for the
    trainer's tests and benchmarks."""

    def __init__(
        self,
        store: Store,
        catalog: Catalog,
        config: Config,
        reader: sources.DatasetReader | None,
        data_sources: remote.SourceCredentials | None = None,
        preparation: Preparation | None = None,
    ) -> None:
        self._store = store
        self._preparation = preparation
        self._catalog = catalog
        self._config = config
        self._reader = reader
        self._sources = data_sources

    def admit(self, principal: Principal, job: job_pb2.Job, *, report: bool = False) -> Admission:
        """Validate and plan a spec as a create would, in HIP-1333 §3's order. Only a job
        `from` an adapter reads the store here (the adapter's row and bytes). With `report`
        (an estimate), an empty or unusable selection is answered with its reasons rather
        than refused (`002_…`: `is_trainable: false`)."""
        found: list[stored_adapters.Adapter] = []

        def inputs(checked: job_pb2.Job) -> None:
            if sha := spec.origin(checked):
                found.append(stored_adapters.read(self._store, self._reader, principal.org, sha))
                adapters.check(checked, found[0])

        base = spec.validate(job, self._catalog, inputs)
        expanded = spec.expand(job, base)
        if found:
            adapters.apply(expanded, found[0])
        dataset, loss_mask = expanded.dataset, expanded.objective.loss_mask
        if sources.at_hand(dataset, base.rows):
            stats, untrainable, evals = _built_in_selection(
                dataset.uri,
                base.rows,
                tuple(dataset.tags),
                dataset.system_prompt,
                loss_mask,
                report,
            )
        else:
            rows = sources.load(dataset, principal.org, self._reader, base.rows, self._sources)
            stats, untrainable, evals = _selection(
                rows, base.rows, dataset.tags, dataset.system_prompt, loss_mask, report
            )
        bound = expanded.resources.steps if expanded.resources.HasField("steps") else None
        plan = planning.plan(stats.trainable_chats, expanded.hyperparameters, bound, evals)
        workload = planning.workload_seconds(
            base.to_proto().profile.duration,
            plan.planned_steps,
            expanded.hyperparameters.max_seq_length,
        )
        first_step = first_step_seconds(base, expanded)
        check_max_seconds(expanded, first_step)
        frozen.apply_plan(expanded, plan)
        return Admission(
            job=expanded,
            base=base,
            plan=plan,
            stats=stats,
            workload_seconds=workload,
            projected_seconds=planning.projected_active_seconds(workload),
            limit_seconds=float(self._config.execution_limit_seconds),
            untrainable=untrainable,
            first_step_seconds=first_step,
        )

    def estimate(
        self, principal: Principal, body: Mapping[str, Any] | None, typed: job_pb2.Job
    ) -> tuple[Admission, job_service_pb2.Price, job_service_pb2.Price, str]:
        """The admission; the price it will most likely come to (`expected`: the base's
        measured or profiled run on the device class that will run it); the price of the
        projected active seconds admission checks, with the authorization margin, on that
        class (`authorization_ceiling`); and the class (`cpu` or `gpu`). Prices are 0 on
        the org's own machines (`002_…` pricing)."""
        request = parse(body, typed)
        check_scope(principal, request)
        admission = self.admit(principal, request, report=True)
        with self._store.unit(write=False) as session:
            kinds = expected.device_kinds(session, principal.org, admission.job, self._catalog)
            device = expected.device_class(kinds, admission.job, admission.base)
            runs = expected.measured_runs(session, principal.org, admission.base.name, device)
            rate = create_rate = 0
            if admission.platform:
                rate = rates.rate(session, rates.compute_meter(admission.base.name, device))[0]
                create_rate = rates.rate(session, admission.meter)[0]
        check_budget(admission, create_rate)
        model = admission.base.to_proto().profile.duration
        likely = planning.expected_seconds(
            model,
            admission.plan.planned_steps,
            admission.job.hyperparameters.max_seq_length,
            admission.base.post_processing_seconds,
            planning.measured_step_seconds(runs),
        )
        seconds = math.ceil(likely)
        projected = math.ceil(admission.projected_seconds)
        ceiling = math.ceil(projected * (100 + self._config.authorization_margin_percent) / 100)
        return (
            admission,
            job_service_pb2.Price(device_seconds=seconds, micro_cents=rates.cost(seconds, rate)),
            job_service_pb2.Price(device_seconds=ceiling, micro_cents=rates.cost(ceiling, rate)),
            "cpu" if device == "cpu" else "gpu",
        )

    def create(
        self,
        principal: Principal,
        body: Mapping[str, Any] | None,
        typed: job_pb2.Job,
        *,
        request_id: str = "",
    ) -> tuple[job_pb2.Job, bool]:
        """The job, and whether this call made it (False: an idempotent replay)."""
        try:
            request = parse(body, typed)
            check_scope(principal, request)
            admission = self.admit(principal, request)
            if not admission.admitted:
                raise _duration_error(admission)
            if admission.platform and not admission.job.resources.HasField("budget"):
                raise errors.ValidationError(
                    "resources.budget",
                    "is required for a job the platform runs (US cents)",
                    reason="BUDGET_REQUIRED",
                )
            if admission.platform:
                with self._store.unit(write=False) as session:
                    check_budget(admission, rates.rate(session, admission.meter)[0])
            return retrying(lambda: self._insert(principal, request, admission, request_id))
        except errors.DomainError as exc:
            with self._store.unit() as session:
                audit.record(
                    session,
                    "training.job.create.rejected",
                    org=principal.org,
                    code=exc.reason,
                    actor=principal.key_id,
                    request_id=request_id,
                )
            raise

    def _insert(
        self, principal: Principal, request: job_pb2.Job, admission: Admission, request_id: str
    ) -> tuple[job_pb2.Job, bool]:
        org, key = principal.org, request.idempotency_key
        shape = spec.shape_sha256(request)
        job_id = ids.derived_id("job", org, key, shape) if key else ids.new_id("job")
        try:
            with self._store.unit() as session:
                store.lock_org(session, org)
                if key and (found := _replay(session, org, key, shape)) is not None:
                    return view.job_proto(session, found, self._catalog), False
                job = admission.job
                open_jobs, number = store.open_and_next(session, org, job.project)
                check_queue(open_jobs, self._config)
                if admission.platform:  # its payer must hold one device's first window
                    windows.admit(
                        session,
                        windows.Policy.of(self._config),
                        org=org,
                        project=job.project,
                        resources=job.resources,
                        meter_name=admission.meter,
                        now=utcnow(),
                        key_id=principal.key_id,
                    )
                # This unit takes a job whose rows are at hand for preparation; else a
                # preparer, in whichever replica, is woken to.
                preparer = self._preparation
                if preparer is not None and not preparer.at_hand(job):
                    preparer = None
                if preparer is None:
                    wakeups.mark(session, wakeups.queued_topic())
                if not job.output.name:
                    job.output.name = f"{job.project}-{number}"
                # Nothing is flushed until the job is inserted, once, in the state this
                # unit leaves it (its moves are no update of its row), before what refers
                # to it (`store.add_job`).
                with session.no_autoflush:
                    row = store.add_job(
                        session,
                        job_id=job_id,
                        org=org,
                        project=job.project,
                        number=number,
                        requested_by=job.requested_by,
                        spec=frozen.spec_json(job),
                        spec_sha256=spec.canonical_sha256(frozen.training_config(job)),
                        plan=planning.FrozenPlan(
                            **dataclasses.asdict(admission.plan),
                            projected_seconds=admission.projected_seconds,
                        ).to_json(),
                        reads_sha256=spec.artifact_sha256(job.dataset.uri) or "",
                        from_sha256=spec.origin(job),
                        key=key,
                        shape_sha256=shape,
                        now=utcnow(),
                        key_id=principal.key_id,
                    )
                    holds_read(session)[job_id] = []
                    audit.record(
                        session,
                        "training.job.create.accepted",
                        org=org,
                        subject=job_id,
                        actor=principal.key_id,
                        request_id=request_id,
                    )
                    # The answer: the job as its create made it (its attempt and no holds are
                    # known, so nothing is read), before preparation moves it on.
                    answer = core_view.job_proto(session, row)
                    taken = None
                    if preparer is not None:
                        taken = preparer.start(session, row, created=True)
                session.flush([row])
        except IntegrityError:
            if not key:
                raise
            # A concurrent create with the same key won; answer what it made.
            with self._store.unit(write=False) as session:
                found = _replay(session, org, key, shape)
                if found is None:
                    raise errors.Conflict() from None
                return view.job_proto(session, found, self._catalog), False
        if preparer is not None and taken is not None:
            try:
                preparer.finish(taken)
            except Exception:  # the loop takes it again once its snapshotting stalls
                log.exception("job %s: preparation at create failed", job_id)
        with self._store.unit(write=False) as session:
            queue = QueueReader(session, self._catalog, utcnow()).position(row, created=True)
        if queue is not None:
            answer.queue.CopyFrom(queue)
        return answer, True


def _selection(
    rows: Sequence[datasets.Row],
    kind: str,
    tags: Iterable[str],
    system_prompt: str,
    loss_mask: str,
    report: bool,
) -> tuple[datasets.Stats, tuple[str, ...], int]:
    """The selected rows' stats, why they cannot train (only when `report`, else that is
    refused) and how many the eval split holds out."""
    untrainable: tuple[str, ...] = ()
    try:
        selected = datasets.select(rows, tags)
        try:
            stats = datasets.check(selected, system_prompt=system_prompt, loss_mask=loss_mask)
        except datasets.DatasetError as exc:
            if not report or exc.reason not in datasets.UNTRAINABLE:
                raise
            stats = datasets.stats(selected, loss_mask)
            untrainable = (exc.reason,)
    except datasets.DatasetError as exc:
        raise sources.domain_error(exc) from None
    held_out = sources.held_out(kind)
    if held_out is not None:
        return stats, untrainable, sum(map(held_out, selected))
    return stats, untrainable, len(datasets.eval_ids(selected, loss_mask))


@functools.lru_cache(maxsize=32)
def _built_in_selection(
    uri: str, kind: str, tags: tuple[str, ...], system_prompt: str, loss_mask: str, report: bool
) -> tuple[datasets.Stats, tuple[str, ...], int]:
    """`_selection` of a dataset built in code, made once a process for what selects it
    (a refusal is not kept: it is raised each time)."""
    rows = sources.load(job_pb2.Dataset(uri=uri), "", None, kind)
    return _selection(rows, kind, tags, system_prompt, loss_mask, report)


def _replay(session: Session, org: str, key: str, shape: str) -> JobRow | None:
    """The job a create with `key` made, if one did; IDEMPOTENCY_KEY_REUSED when that
    create had another shape."""
    used = store.used_key(session, org, key)
    if used is None:
        return None
    if used.request_sha256 != shape:
        raise errors.AlreadyExists(
            "The idempotency key was used with another request.",
            reason="IDEMPOTENCY_KEY_REUSED",
            metadata={"field": "idempotency_key"},
        )
    return store.job_by_id(session, used.resource_id)
