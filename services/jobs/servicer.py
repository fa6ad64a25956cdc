"""JobService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from typing import TypeAlias, TypeVar

import grpc
from google.protobuf import json_format

from services.core import context, errors, trace, validation
from services.core.states import TERMINAL
from services.core.wakeups import Wakeups, job_topic, woken
from services.jobs.service import JobService
from trainyard.job.v1 import (
    data_source_pb2,
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    publication_pb2,
)
from trainyard.training.catalog import Catalog

MAX_WAIT_SECONDS = 25
# The safety net under the wake-ups: how often a waiter reads again when none came.
POLL_SECONDS = 1.0

# A watch says the job again after this long with nothing else to send, so the gateway's
# idle timeout never cuts a watch of a quiet job (one waiting for a machine, or a lease).
KEEPALIVE_SECONDS = 60.0


def keepalive(idle_timeout_seconds: int) -> float:
    """How often a quiet watch sends: within the gateway's idle timeout, at most a minute."""
    return min(KEEPALIVE_SECONDS, idle_timeout_seconds / 2)


Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]
T = TypeVar("T")


def _check_wait(wait: int) -> None:
    """A long poll holds at most `MAX_WAIT_SECONDS`."""
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise errors.ValidationError("wait", "must be between 0 and 25 seconds")


def _metadata(ctx: Ctx, name: str) -> str:
    return next((str(v) for k, v in ctx.invocation_metadata() or () if k == name), "")


class JobServicer(job_service_pb2_grpc.JobServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""

    def __init__(
        self,
        service: JobService,
        catalog: Catalog,
        wakeups: Wakeups | None = None,
        *,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
    ) -> None:
        self._service = service
        self._keepalive = keepalive_seconds
        self._catalog = catalog
        # A job's record growing, in whichever process: the long polls and watches wake.
        self._wakeups = wakeups or Wakeups()

    async def ListModels(
        self, request: job_service_pb2.ListModelsRequest, ctx: Ctx
    ) -> job_service_pb2.ListModelsResponse:
        return job_service_pb2.ListModelsResponse(models=self._catalog.to_proto())

    async def CreateJob(self, request: job_service_pb2.CreateJobRequest, ctx: Ctx) -> job_pb2.Job:
        trace.hop("create.received")
        body = json_format.MessageToDict(request.body) if request.HasField("body") else None
        job, _ = await asyncio.to_thread(
            self._service.creation.create,
            context.principal(),
            body,
            request.job,
            request_id=context.request_id.get(),
        )
        return job

    async def EstimateJob(
        self, request: job_service_pb2.EstimateJobRequest, ctx: Ctx
    ) -> job_service_pb2.EstimateJobResponse:
        body = json_format.MessageToDict(request.body) if request.HasField("body") else None
        found, expected, ceiling, device = await asyncio.to_thread(
            self._service.creation.estimate, context.principal(), body, request.job
        )
        stats = found.stats
        return job_service_pb2.EstimateJobResponse(
            job=found.job,
            dataset=job_service_pb2.DatasetStats(
                selected_chats=stats.selected_chats,
                selected_messages=stats.selected_messages,
                trainable_chats=stats.trainable_chats,
                nonempty_text_messages=stats.nonempty_text_messages,
                is_trainable=stats.is_trainable and not found.untrainable,
                reasons=found.untrainable,
            ),
            duration_components=job_service_pb2.DurationComponents(
                workload_seconds=found.workload_seconds,
                post_processing_tolerance_seconds=found.projected_seconds - found.workload_seconds,
                projected_active_seconds=found.projected_seconds,
                execution_limit_seconds=found.limit_seconds,
            ),
            admitted=found.admitted,
            expected=expected,
            authorization_ceiling=ceiling,
            device_class=device,
        )

    async def CreateDataSource(
        self, request: job_service_pb2.CreateDataSourceRequest, ctx: Ctx
    ) -> data_source_pb2.DataSource:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            self._service.data_sources.create,
            context.principal(),
            request,
            context.request_id.get(),
        )

    async def ListDataSources(
        self, request: job_service_pb2.ListDataSourcesRequest, ctx: Ctx
    ) -> job_service_pb2.ListDataSourcesResponse:
        found = await asyncio.to_thread(self._service.data_sources.list, context.principal())
        return job_service_pb2.ListDataSourcesResponse(data_sources=found)

    async def DeleteDataSource(
        self, request: job_service_pb2.DeleteDataSourceRequest, ctx: Ctx
    ) -> job_service_pb2.DeleteDataSourceResponse:
        deleted = await asyncio.to_thread(
            self._service.data_sources.delete,
            context.principal(),
            request.name,
            context.request_id.get(),
        )
        return job_service_pb2.DeleteDataSourceResponse(name=request.name, deleted=deleted)

    async def GetJob(self, request: job_service_pb2.GetJobRequest, ctx: Ctx) -> job_pb2.Job:
        return await asyncio.to_thread(
            self._service.reads.get,
            context.principal(),
            request.id,
            request.identifier,
            request.project,
        )

    async def ListJobs(
        self, request: job_service_pb2.ListJobsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobsResponse:
        principal = context.principal()

        def page() -> job_service_pb2.ListJobsResponse:
            jobs, token, total = self._service.reads.list_jobs(
                principal,
                status=request.status,
                project=request.project,
                size=request.page_size,
                token=request.page_token,
            )
            # Built here, not on the event loop: a page copies a hundred jobs.
            return job_service_pb2.ListJobsResponse(
                jobs=jobs, next_page_token=token, total_size=total
            )

        return await asyncio.to_thread(page)

    async def CancelJob(self, request: job_service_pb2.CancelJobRequest, ctx: Ctx) -> job_pb2.Job:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            lambda: self._service.control.cancel(
                context.principal(), request.id, request_id=context.request_id.get()
            )
        )

    async def RetryJob(
        self, request: job_service_pb2.RetryJobRequest, ctx: Ctx
    ) -> job_service_pb2.RetryJobResponse:
        request = validation.read_body(request)
        key = request.idempotency_key or _metadata(ctx, "idempotency-key")
        job, attempt = await asyncio.to_thread(
            lambda: self._service.control.retry(
                context.principal(),
                request.id,
                key=key,
                resume=request.resume_from_checkpoint,
                request_id=context.request_id.get(),
            )
        )
        return job_service_pb2.RetryJobResponse(job=job, attempt=attempt)

    async def PublishJob(
        self, request: job_service_pb2.PublishJobRequest, ctx: Ctx
    ) -> publication_pb2.Publication:
        request = validation.read_body(request)
        return await asyncio.to_thread(
            lambda: self._service.publishing.publish(
                context.principal(),
                request.id,
                name=request.name,
                force=request.force,
                route=request.route if request.HasField("route") else None,
                request_id=context.request_id.get(),
            )
        )

    async def ListPublished(
        self, request: job_service_pb2.ListPublishedRequest, ctx: Ctx
    ) -> job_service_pb2.ListPublishedResponse:
        return await asyncio.to_thread(
            self._service.publishing.list_published, context.principal(), request.revision
        )

    async def _held(
        self, job_id: str, wait: float, read: Callable[[], T], ready: Callable[[T], bool]
    ) -> T:
        """A long poll: `read()` (in a worker thread), read again at each wake-up of the
        job's record (or every `POLL_SECONDS` when none comes), until `ready` says the
        answer can go or `wait` seconds have passed; the last answer read."""
        deadline = time.monotonic() + wait
        with self._wakeups.watching(job_topic(job_id)) as grew:
            while True:
                grew.clear()
                found = await asyncio.to_thread(read)
                left = deadline - time.monotonic()
                if ready(found) or left <= 0:
                    return found
                await woken(grew, min(left, POLL_SECONDS))

    async def ListJobEvents(
        self, request: job_service_pb2.ListJobEventsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobEventsResponse:
        _check_wait(request.wait)
        principal = context.principal()
        # An ended job has nothing more to say (a retry moves it out of its end first):
        # answer at once rather than hold the wait.
        events, status = await self._held(
            request.id,
            request.wait,
            lambda: self._service.reads.events(
                principal, request.id, after=request.after, size=request.page_size
            ),
            lambda found: bool(found[0]) or found[1] in TERMINAL,
        )
        return job_service_pb2.ListJobEventsResponse(
            events=events, next_after=events[-1].seq if events else request.after, status=status
        )

    async def WatchJob(
        self, request: job_service_pb2.WatchJobRequest, ctx: Ctx
    ) -> AsyncIterator[job_service_pb2.WatchJobResponse]:
        principal = context.principal()
        reads = self._service.reads
        version, status = await asyncio.to_thread(reads.job_version, principal, request.id)
        yield job_service_pb2.WatchJobResponse(
            job=await asyncio.to_thread(reads.get, principal, request.id)
        )
        after, caught_up, sent = request.after, False, time.monotonic()
        with self._wakeups.watching(job_topic(request.id)) as grew:
            while True:
                grew.clear()
                events, _ = await asyncio.to_thread(
                    functools.partial(reads.events, principal, request.id, after=after, size=500)
                )
                for event in events:
                    after, sent = event.seq, time.monotonic()
                    yield job_service_pb2.WatchJobResponse(event=event)
                now_version, status = await asyncio.to_thread(
                    reads.job_version, principal, request.id
                )
                if not caught_up and len(events) < 500:
                    caught_up = True
                    yield job_service_pb2.WatchJobResponse(caught_up=True)
                if now_version != version or time.monotonic() - sent >= self._keepalive:
                    version, sent = now_version, time.monotonic()
                    yield job_service_pb2.WatchJobResponse(
                        job=await asyncio.to_thread(reads.get, principal, request.id)
                    )
                if status in TERMINAL and not events:
                    return
                if not events:
                    await woken(grew, POLL_SECONDS)

    async def ListJobMetrics(
        self, request: job_service_pb2.ListJobMetricsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobMetricsResponse:
        return await asyncio.to_thread(
            lambda: self._service.reads.metrics(
                context.principal(),
                request.id,
                names=list(request.names),
                after_step=request.after_step,
                max_points=request.max_points,
            )
        )

    async def ListJobAttempts(
        self, request: job_service_pb2.ListJobAttemptsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobAttemptsResponse:
        found = await asyncio.to_thread(
            self._service.reads.attempts, context.principal(), request.id
        )
        return job_service_pb2.ListJobAttemptsResponse(attempts=found)

    async def GetAttemptLog(
        self, request: job_service_pb2.GetAttemptLogRequest, ctx: Ctx
    ) -> job_service_pb2.AttemptLog:
        """A part of an attempt's log; with `wait`, held until it has text or the attempt
        ends (a follower sends `next_offset` back as `offset`)."""
        _check_wait(request.wait)
        principal = context.principal()
        return await self._held(
            request.id,
            request.wait,
            functools.partial(self._service.reads.attempt_log, principal, request),
            lambda part: bool(part.text) or part.complete,
        )

    async def ListJobDatasetItems(
        self, request: job_service_pb2.ListJobDatasetItemsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobDatasetItemsResponse:
        return await asyncio.to_thread(
            lambda: self._service.reads.dataset_items(
                context.principal(),
                request.id,
                offset=request.offset,
                limit=request.limit,
                search=request.search,
                split=request.split,
            )
        )

    async def GetJobDatasetItem(
        self, request: job_service_pb2.GetJobDatasetItemRequest, ctx: Ctx
    ) -> job_pb2.DatasetItem:
        return await asyncio.to_thread(
            self._service.reads.dataset_item, context.principal(), request.id, request.item
        )
