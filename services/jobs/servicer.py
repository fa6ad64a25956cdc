"""JobService over gRPC: proto in, domain call, proto out."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from google.protobuf import json_format

from services.core import context, errors
from services.core.states import TERMINAL
from services.core.wakeups import Wakeups, job_topic, woken
from services.jobs.service import JobService
from trainyard.job.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc, publication_pb2
from trainyard.training.catalog import Catalog

MAX_WAIT_SECONDS = 25
# The safety net under the wake-ups: how often a waiter reads again when none came.
POLL_SECONDS = 1.0

Ctx: TypeAlias = grpc.aio.ServicerContext  # type: ignore[type-arg]


def _metadata(ctx: Ctx, name: str) -> str:
    return next((str(v) for k, v in ctx.invocation_metadata() or () if k == name), "")


class JobServicer(job_service_pb2_grpc.JobServiceServicer):
    """Methods not overridden here answer UNIMPLEMENTED in the standard error shape."""

    def __init__(
        self,
        service: JobService,
        catalog: Catalog,
        kick: asyncio.Event | None = None,
        wakeups: Wakeups | None = None,
    ) -> None:
        self._service = service
        self._catalog = catalog
        self._kick = kick or asyncio.Event()
        # A job's record growing, in whichever process: the long polls and watches wake.
        self._wakeups = wakeups or Wakeups()

    async def ListModels(
        self, request: job_service_pb2.ListModelsRequest, ctx: Ctx
    ) -> job_service_pb2.ListModelsResponse:
        return job_service_pb2.ListModelsResponse(models=self._catalog.to_proto())

    async def CreateJob(self, request: job_service_pb2.CreateJobRequest, ctx: Ctx) -> job_pb2.Job:
        body = json_format.MessageToDict(request.body) if request.HasField("body") else None
        job, created = await asyncio.to_thread(
            self._service.create,
            context.principal(),
            body,
            request.job,
            request_id=context.request_id.get(),
        )
        if created:
            self._kick.set()
        return job

    async def EstimateJob(
        self, request: job_service_pb2.EstimateJobRequest, ctx: Ctx
    ) -> job_service_pb2.EstimateJobResponse:
        body = json_format.MessageToDict(request.body) if request.HasField("body") else None
        found, expected, ceiling = await asyncio.to_thread(
            self._service.estimate, context.principal(), body, request.job
        )
        stats = found.stats
        return job_service_pb2.EstimateJobResponse(
            job=found.job,
            dataset=job_service_pb2.DatasetStats(
                selected_chats=stats.selected_chats,
                selected_messages=stats.selected_messages,
                trainable_chats=stats.trainable_chats,
                nonempty_text_messages=stats.nonempty_text_messages,
                is_trainable=stats.is_trainable,
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
        )

    async def GetJob(self, request: job_service_pb2.GetJobRequest, ctx: Ctx) -> job_pb2.Job:
        return await asyncio.to_thread(
            self._service.get, context.principal(), request.id, request.identifier, request.project
        )

    async def ListJobs(
        self, request: job_service_pb2.ListJobsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobsResponse:
        principal = context.principal()

        def page() -> job_service_pb2.ListJobsResponse:
            jobs, token, total = self._service.list_jobs(
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
        return await asyncio.to_thread(
            lambda: self._service.cancel(
                context.principal(), request.id, request_id=context.request_id.get()
            )
        )

    async def RetryJob(
        self, request: job_service_pb2.RetryJobRequest, ctx: Ctx
    ) -> job_service_pb2.RetryJobResponse:
        key = request.idempotency_key or _metadata(ctx, "idempotency-key")
        job, attempt = await asyncio.to_thread(
            lambda: self._service.retry(
                context.principal(),
                request.id,
                key=key,
                resume=request.resume_from_checkpoint,
                request_id=context.request_id.get(),
            )
        )
        self._kick.set()
        return job_service_pb2.RetryJobResponse(job=job, attempt=attempt)

    async def PublishJob(
        self, request: job_service_pb2.PublishJobRequest, ctx: Ctx
    ) -> publication_pb2.Publication:
        return await asyncio.to_thread(
            lambda: self._service.publish(
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
            self._service.list_published, context.principal(), request.revision
        )

    async def ListJobEvents(
        self, request: job_service_pb2.ListJobEventsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobEventsResponse:
        if not 0 <= request.wait <= MAX_WAIT_SECONDS:
            raise errors.ValidationError("wait", "must be between 0 and 25 seconds")
        principal = context.principal()
        deadline = time.monotonic() + request.wait
        with self._wakeups.watching(job_topic(request.id)) as grew:
            while True:
                grew.clear()
                events, status = await asyncio.to_thread(
                    lambda: self._service.events(
                        principal, request.id, after=request.after, size=request.page_size
                    )
                )
                # An ended job has nothing more to say (a retry moves it out of its end
                # first): answer at once rather than hold the wait.
                left = deadline - time.monotonic()
                if events or status in TERMINAL or left <= 0:
                    break
                await woken(grew, min(left, POLL_SECONDS))
        return job_service_pb2.ListJobEventsResponse(
            events=events, next_after=events[-1].seq if events else request.after, status=status
        )

    async def WatchJob(
        self, request: job_service_pb2.WatchJobRequest, ctx: Ctx
    ) -> AsyncIterator[job_service_pb2.WatchJobResponse]:
        principal = context.principal()
        service = self._service
        version, status = await asyncio.to_thread(service.job_version, principal, request.id)
        yield job_service_pb2.WatchJobResponse(
            job=await asyncio.to_thread(service.get, principal, request.id)
        )
        after, caught_up = request.after, False
        with self._wakeups.watching(job_topic(request.id)) as grew:
            while True:
                grew.clear()
                events, _ = await asyncio.to_thread(
                    functools.partial(service.events, principal, request.id, after=after, size=500)
                )
                for event in events:
                    after = event.seq
                    yield job_service_pb2.WatchJobResponse(event=event)
                now_version, status = await asyncio.to_thread(
                    service.job_version, principal, request.id
                )
                if not caught_up and len(events) < 500:
                    caught_up = True
                    yield job_service_pb2.WatchJobResponse(caught_up=True)
                if now_version != version:
                    version = now_version
                    yield job_service_pb2.WatchJobResponse(
                        job=await asyncio.to_thread(service.get, principal, request.id)
                    )
                if status in TERMINAL and not events:
                    return
                if not events:
                    await woken(grew, POLL_SECONDS)

    async def ListJobMetrics(
        self, request: job_service_pb2.ListJobMetricsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobMetricsResponse:
        return await asyncio.to_thread(
            lambda: self._service.metrics(
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
        found = await asyncio.to_thread(self._service.attempts, context.principal(), request.id)
        return job_service_pb2.ListJobAttemptsResponse(attempts=found)

    async def ListJobDatasetItems(
        self, request: job_service_pb2.ListJobDatasetItemsRequest, ctx: Ctx
    ) -> job_service_pb2.ListJobDatasetItemsResponse:
        return await asyncio.to_thread(
            lambda: self._service.dataset_items(
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
            self._service.dataset_item, context.principal(), request.id, request.item
        )
