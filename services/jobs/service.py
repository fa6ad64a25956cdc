"""JobService's use cases, one module each, grouped so the servicer and the server's
preparation loop hold one handle; `server.py` builds them:

    create.py       EstimateJob, CreateJob: admission, idempotency, numbering, insert
    reads.py        GetJob, ListJobs, ListJobEvents, WatchJob, ListJobMetrics,
                    ListJobAttempts, ListJobDatasetItems, GetJobDatasetItem
    control.py      CancelJob, RetryJob
    publishing.py   PublishJob, ListPublished
    preparation.py  the dataset snapshot of a queued job (the server's background loop)
    data_sources.py CreateDataSource, ListDataSources, DeleteDataSource; remote.py reads
                    the `s3://` and `hf://` datasets
    store.py        every query; frozen.py the spec and plan as a job row holds them

No gRPC here."""

from __future__ import annotations

import dataclasses

from services.jobs.control import JobControl
from services.jobs.create import JobCreation
from services.jobs.data_sources import DataSources
from services.jobs.preparation import Preparation
from services.jobs.publishing import Publishing
from services.jobs.reads import JobReads


@dataclasses.dataclass(frozen=True)
class JobService:
    creation: JobCreation
    reads: JobReads
    control: JobControl
    publishing: Publishing
    preparation: Preparation
    data_sources: DataSources
