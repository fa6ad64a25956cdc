"""The reads of JobService: a job (by id or by number), the org's jobs a page at a time, a
job's events, metrics and attempts, and the items of the snapshot it trained on. Nothing
here writes."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Sequence

from services.core import attempt_logs, errors
from services.core.auth import Principal
from services.core.pagetoken import PageTokens, page_size
from services.core.states import ATTEMPT_TERMINAL, JobStatus
from services.core.store import Store
from services.core.tables import AttemptRow
from services.jobs import series, snapshots, spec, store, view
from trainyard.job.v1 import attempt_pb2, event_pb2, job_pb2, job_service_pb2
from trainyard.training.catalog import Catalog

MAX_DATASET_PAGE = 200
MAX_EVENTS_PAGE = 500
MAX_SEARCH = 200
SPLITS = ("all", "train", "eval")
IDENTIFIERS = ("id", "number")
STATUSES = tuple(str(s) for s in JobStatus)


def _one_of(field: str, value: str, supported: tuple[str, ...]) -> None:
    """A closed-set value, refused with the set it must be one of."""
    if value not in supported:
        raise errors.ValidationError(
            field, "is not one of the accepted values", metadata={"supported": ",".join(supported)}
        )


class JobReads:
    def __init__(self, store: Store, tokens: PageTokens, catalog: Catalog) -> None:
        self._store = store
        self._tokens = tokens
        self._catalog = catalog

    def get(
        self, principal: Principal, job_id: str, identifier: str = "", project: str = ""
    ) -> job_pb2.Job:
        """`job_id` is the job's id, or with `identifier: number` its number in `project`."""
        _one_of("identifier", identifier or "id", IDENTIFIERS)
        with self._store.unit(write=False) as session:
            if identifier == "number":
                found = None
                if job_id.isdigit() and len(job_id) <= 18:
                    found = store.job_by_number(
                        session, principal.org, project or spec.DEFAULT_PROJECT, int(job_id)
                    )
                if found is None or not principal.sees_project(found.project):
                    raise errors.NotFound()
                row = found
            else:
                row = store.owned_job(session, principal.org, job_id)
            return view.job_proto(session, row, self._catalog, preview=True)

    def list_jobs(
        self, principal: Principal, *, status: str, project: str, size: int, token: str
    ) -> tuple[list[job_pb2.Job], str, int]:
        """A page of the org's jobs, newest first; the next page's token and the total."""
        if status:
            _one_of("status", status, STATUSES)
        limit = page_size(size)
        scope = {"org": principal.org, "method": "ListJobs", "status": status, "project": project}
        position = self._tokens.decode(token, scope)
        after = (
            (dt.datetime.fromisoformat(str(position["t"])), str(position["id"]))
            if position
            else None
        )
        org, within = principal.org, principal.projects
        with self._store.unit(write=False) as session:
            total = store.count_jobs(session, org, status=status, project=project, within=within)
            rows = store.jobs_page(
                session,
                org,
                status=status,
                project=project,
                after=after,
                limit=limit + 1,
                within=within,
            )
            jobs = view.job_protos(session, rows[:limit], self._catalog)
            next_token = ""
            if len(rows) > limit:
                last = rows[limit - 1]
                next_token = self._tokens.encode(
                    {"t": last.create_time.isoformat(), "id": last.id}, scope
                )
            return jobs, next_token, total

    def events(
        self, principal: Principal, job_id: str, *, after: int, size: int
    ) -> tuple[list[event_pb2.JobEvent], str]:
        """The job's events after seq `after`, in order, and the job's status."""
        if after < 0:
            raise errors.ValidationError("after", "must not be negative")
        limit = page_size(size, default=100, maximum=MAX_EVENTS_PAGE)
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, job_id)
            found = store.events_after(session, row.id, after, limit)
            return [view.event_proto(e) for e in found], row.status

    def job_version(self, principal: Principal, job_id: str) -> tuple[int, str]:
        """A cheap read of a job's version and status, for watchers."""
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, job_id)
            return row.version, row.status

    def metrics(
        self,
        principal: Principal,
        job_id: str,
        *,
        names: list[str],
        after_step: int,
        max_points: int = 0,
    ) -> job_service_pb2.ListJobMetricsResponse:
        """One series per metric name, its points after `after_step`, each cut to at most
        `max_points` (0: every point), and the event seq they were read at."""
        if max_points and not series.MIN_POINTS <= max_points <= series.MAX_POINTS:
            raise errors.ValidationError(
                "max_points", f"must be 0 or from {series.MIN_POINTS} to {series.MAX_POINTS:,}"
            )
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, job_id)
            # The seq first: a report committed between the two reads adds points this
            # answer carries and its events repeat, never points neither has.
            answer = job_service_pb2.ListJobMetricsResponse(
                next_after=store.last_event_seq(session, row.id)
            )
            points = store.metric_points(session, row.id, names=names, after_step=after_step)
            resumed = {
                a.attempt_number: a.resume_step or 0
                for a in store.attempts(session, row.id)
                if a.resume_from_checkpoint
            }
            windows = series.trained_steps(store.metric_attempts(session, row.id), resumed)
        # One point a step, of the attempt that trained the job's weights at that step: a
        # retry's points replace an earlier attempt's from where it resumed.
        points = [
            p
            for p in points
            if p.attempt_number in windows
            and windows[p.attempt_number][0] < p.step <= windows[p.attempt_number][1]
        ]
        for name, group in itertools.groupby(points, key=lambda p: p.name):
            kept = list(group)
            if max_points:
                kept = series.downsample(kept, max_points, value=lambda p: p.value)
            answer.series.append(
                event_pb2.MetricSeries(
                    name=name,
                    points=[
                        event_pb2.MetricPoint(
                            step=p.step, value=p.value, create_time=view.ts(p.create_time)
                        )
                        for p in kept
                    ],
                )
            )
        return answer

    def attempts(self, principal: Principal, job_id: str) -> list[attempt_pb2.Attempt]:
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, job_id)
            logs = attempt_logs.sizes(session, row.id)
            return [
                view.attempt_proto(a, logs.get(a.attempt_number, 0))
                for a in store.attempts(session, row.id)
            ]

    def attempt_log(
        self, principal: Principal, request: job_service_pb2.GetAttemptLogRequest
    ) -> job_service_pb2.AttemptLog:
        """A part of an attempt's log (`attempt_log_part` says which)."""
        read = attempt_log_part(request)
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, request.id)
            attempt = _attempt(store.attempts(session, row.id), request.attempt)
            part = read(attempt_logs.Log(session, row.id, attempt.attempt_number))
            return job_service_pb2.AttemptLog(
                job_id=row.id,
                attempt_number=attempt.attempt_number,
                status=attempt.status,
                text=part.text,
                offset=part.offset,
                next_offset=part.next_offset,
                first_line=part.first_line,
                size=part.size,
                start=part.start,
                complete=attempt.status in ATTEMPT_TERMINAL,
            )

    def dataset_items(
        self, principal: Principal, job_id: str, *, offset: int, limit: int, search: str, split: str
    ) -> job_service_pb2.ListJobDatasetItemsResponse:
        """A page of the job's snapshot, by position; a search matches names and contents."""
        if offset < 0:
            raise errors.ValidationError("offset", "must not be negative")
        limit = page_size(limit, default=25, maximum=MAX_DATASET_PAGE)
        split = split or "all"
        _one_of("split", split, SPLITS)
        if len(search) > MAX_SEARCH:
            raise errors.ValidationError("search", "must be at most 200 characters")
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, job_id)
            org, sha256 = row.org, row.dataset_sha256
            items = snapshots.snapshot_items(
                session, org, sha256, split=split, search=search, offset=offset, limit=limit + 1
            )
            answer = job_service_pb2.ListJobDatasetItemsResponse(
                items=[view.item_proto(i, messages="preview") for i in items[:limit]],
                offset=offset,
                limit=limit,
                has_more=len(items) > limit,
                search_applied=bool(search),
                split=split,
            )
            if not search:  # a search is not counted (002: no second pass over the shards)
                answer.total = snapshots.count_snapshot_items(
                    session, org, sha256, split=split, search=search
                )
            if answer.has_more:
                answer.next_offset = offset + limit
            return answer

    def dataset_item(self, principal: Principal, job_id: str, item_id: str) -> job_pb2.DatasetItem:
        with self._store.unit(write=False) as session:
            row = store.owned_job(session, principal.org, job_id)
            item = snapshots.snapshot_item(session, row.org, row.dataset_sha256, item_id)
            if item is None:
                raise errors.NotFound()
            return view.item_proto(item, messages="whole")


# The bounds of an attempt log's read.
MAX_LOG_LINES = 10_000
MAX_LOG_BYTES_READ = 1024 * 1024
DEFAULT_TAIL_LINES, DEFAULT_LOG_LINES, DEFAULT_LOG_BYTES = 100, 1000, 65536


def _bounded(field: str, value: int, default: int, maximum: int) -> int:
    if not 0 <= value <= maximum:
        raise errors.ValidationError(field, f"must be between 0 and {maximum}")
    return value or default


def attempt_log_part(
    request: job_service_pb2.GetAttemptLogRequest,
) -> Callable[[attempt_logs.Log], attempt_logs.Part]:
    """Which part of a log a request reads: a byte range, a line range or the tail (the
    default); refused, naming the field, when it mixes them or leaves their bounds."""
    by_bytes = request.HasField("offset") or request.limit_bytes
    by_lines = request.HasField("start_line") or request.max_lines
    if by_bytes and (by_lines or request.tail_lines):
        field = "start_line" if by_lines else "tail_lines"
        raise errors.ValidationError(field, "must not be given with offset or limit_bytes")
    if by_lines and request.tail_lines:
        raise errors.ValidationError("tail_lines", "must not be given with start_line or max_lines")
    if by_bytes:
        if request.offset < 0:
            raise errors.ValidationError("offset", "must not be negative")
        limit = _bounded("limit_bytes", request.limit_bytes, DEFAULT_LOG_BYTES, MAX_LOG_BYTES_READ)
        return lambda log: log.bytes(request.offset, limit)
    if by_lines:
        if request.HasField("start_line") and request.start_line < 1:
            raise errors.ValidationError("start_line", "must be at least 1")
        count = _bounded("max_lines", request.max_lines, DEFAULT_LOG_LINES, MAX_LOG_LINES)
        return lambda log: log.lines(request.start_line or 1, count)
    count = _bounded("tail_lines", request.tail_lines, DEFAULT_TAIL_LINES, MAX_LOG_LINES)
    return lambda log: log.tail(count)


def _attempt(attempts: Sequence[AttemptRow], named: str) -> AttemptRow:
    """The attempt a request names by number or id; NOT_FOUND when the job has none such."""
    if not (named.isascii() and (named.isdigit() or named.startswith("att_"))):
        raise errors.ValidationError("attempt", "must be an attempt's number or id")
    for attempt in attempts:
        if named in (attempt.id, str(attempt.attempt_number)):
            return attempt
    raise errors.NotFound()
