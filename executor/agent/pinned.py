"""Whether the base a task names is the one its job pinned: a local base's files hashed
here (`trainyard.training.pins`) against the revision the job took at create."""

from __future__ import annotations

from collections.abc import Mapping

from trainyard.job.v1 import job_pb2
from trainyard.training.catalog import Catalog

# The failure a task reports when this executor's bytes under the base's name differ.
BASE_CHANGED = "base_changed"
# The revision jobs created before bases were pinned carry: nothing to compare against.
UNPINNED = ("", "local")


def refusal(job: job_pb2.Job, env: Mapping[str, str]) -> str:
    """`base_changed` when this executor holds a local base under the job's `base_model`
    whose files hash to another revision than the job's, else "". A base it lacks is
    the trainer's to report (`base_not_found`)."""
    base = Catalog.from_env(env).get(job.base_model)
    if base is None or not base.path or job.revision in UNPINNED:
        return ""
    return "" if base.revision == job.revision else BASE_CHANGED
