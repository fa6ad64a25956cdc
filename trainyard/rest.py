"""The REST face of the contract: the HTTP status each error reason answers with, and the
shape of a refusal. gRPC clients keep canonical codes and `google.rpc.Status`; a REST
client reads an RFC 9457 problem document (`application/problem+json`), except for the
money refusals, which answer the money wire's `{"error": {"code", "message"}}` (HIP-1333
§3).

The table is checked against the reason enum (`tests/unit/test_rest.py`), so a new
reason cannot go without its status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.rpc import error_details_pb2, status_pb2

from trainyard.common.v1 import error_reason_pb2

# The fields a REST answer writes `null` when unset, where proto JSON leaves them out: those
# the data contract (002) shows as `null`, the block that did not apply or never ran, and a
# figure the device cannot give. The gateway's REST face and the CLI's JSON both read it.
NULLABLE: Mapping[str, tuple[str, ...]] = {
    "trainyard.job.v1.Job": ("evaluation", "outcome", "preparation", "queue"),
    "trainyard.job.v1.Progress": ("mfu", "peak_tflops"),
    "trainyard.job.v1.QueuePosition": ("eta_seconds",),
    "trainyard.artifact.v1.Artifact": ("expire_time", "kept_by"),
    "trainyard.job.v1.ListJobDatasetItemsResponse": ("total",),
    "trainyard.org.v1.ApiKey": (
        "monthly_spend_cap",
        "expire_time",
        "revoke_time",
        "last_used_time",
    ),
    "trainyard.org.v1.Usage": ("limit",),
    "trainyard.org.v1.Spend": ("limit",),
    "trainyard.org.v1.ProjectSpend": ("limit",),
}
PROBLEM_TYPE = "https://trainyard.dev/problems/"
PROBLEM_CONTENT_TYPE = "application/problem+json"

# reason → (HTTP status, title). Where the seeds give a status, it is theirs: 409 for a
# state that refuses the call, 422 for a dataset or duration refusal at create (002), 402
# for money, 503 for what is unavailable now.
STATUSES: Mapping[str, tuple[int, str]] = {
    "UNAUTHENTICATED": (401, "Unauthenticated"),
    "PERMISSION_DENIED": (403, "Permission denied"),
    "INVALID_REQUEST": (400, "Invalid request"),
    "MALFORMED_JSON": (400, "Malformed JSON"),
    "NOT_FOUND": (404, "Not found"),
    "INVALID_TRANSITION": (409, "Invalid transition"),
    "METHOD_NOT_ALLOWED": (405, "Method not allowed"),
    "CONFLICT": (409, "Conflict"),
    "INTERNAL_ERROR": (500, "Internal error"),
    "UNSUPPORTED_BASE": (400, "Unsupported base"),
    "UNSUPPORTED_ADAPTATION": (400, "Unsupported adaptation"),
    "UNSUPPORTED_OBJECTIVE": (400, "Unsupported objective"),
    "UNSUPPORTED_PROTECT": (400, "Unsupported protection"),
    "UNSUPPORTED_OUTPUT": (400, "Unsupported output"),
    "UNSUPPORTED_DEVICE": (400, "Unsupported device"),
    "UNSUPPORTED_EVALUATION": (400, "Unsupported evaluation"),
    "INCOMPATIBLE_ADAPTERS": (400, "Incompatible adapters"),
    "INCOMPATIBLE_BASIS": (400, "Incompatible basis"),
    "BUDGET_REQUIRED": (400, "Budget required"),
    "INSUFFICIENT_BALANCE": (402, "Insufficient balance"),
    "SPEND_CAP_EXCEEDED": (402, "Spend cap exceeded"),
    "BALANCE_UNAVAILABLE": (503, "Balance unavailable"),
    # The org's limit of jobs that have not ended: HIP-1333 §12's `409 job_limit`.
    "JOB_LIMIT": (409, "Job limit"),
    "LEASE_LOST": (409, "Lease lost"),
    "PUBLISHED": (409, "Published"),
    "IN_USE": (409, "In use"),
    "PENDING_LIMIT": (409, "Pending limit"),
    "ROUTE_CONFLICT": (409, "Route conflict"),
    "TRAINING_DATASET_SELECTION_INVALID": (422, "Dataset selection invalid"),
    "TRAINING_DATASET_EMPTY": (422, "Dataset empty"),
    "TRAINING_DATASET_UNUSABLE": (422, "Dataset unusable"),
    "TRAINING_DATASET_CONFLICT": (422, "Dataset conflict"),
    "TRAINING_DURATION_EXCEEDS_LIMIT": (422, "Duration exceeds limit"),
    "TRAINING_JOB_NOT_IN_TRAINING": (409, "Job not in training"),
    "TRAINING_JOB_FINALIZING": (409, "Job finalizing"),
    "IDEMPOTENCY_KEY_REUSED": (409, "Idempotency key reused"),
    "UNIMPLEMENTED": (501, "Not implemented"),
    "UNAVAILABLE": (503, "Unavailable"),
    "ARTIFACT_MISMATCH": (409, "Artifact mismatch"),
    "ARTIFACT_NOT_UPLOADED": (409, "Artifact not uploaded"),
    "CHECKPOINT_UNAVAILABLE": (409, "Checkpoint unavailable"),
    # HIP-1333 §7: `503 engine_full`, `503 training_unavailable`.
    "ENGINE_FULL": (503, "Engine full"),
    "TRAINING_UNAVAILABLE": (503, "Training unavailable"),
    "CLIENT_GONE": (409, "Client gone"),
    "RATE_LIMITED": (429, "Too many requests"),
    "PAYLOAD_TOO_LARGE": (413, "Content too large"),
    "DEADLINE_EXCEEDED": (504, "Deadline exceeded"),
    "WEBHOOK_LIMIT": (409, "Webhook limit"),
    # As PUBLISHED: the object's state refuses the deletion until it is unpinned.
    "PINNED": (409, "Pinned"),
}
# Refusals a retry meets where a create met 422: the job exists, its state refuses (002).
AT_RETRY = frozenset(
    {
        "TRAINING_DATASET_EMPTY",
        "TRAINING_DATASET_UNUSABLE",
        "TRAINING_DATASET_CONFLICT",
        "TRAINING_DURATION_EXCEEDS_LIMIT",
    }
)
# HIP-1333 §3: these three answer the money wire's body, not a problem document.
MONEY = frozenset({"INSUFFICIENT_BALANCE", "SPEND_CAP_EXCEEDED", "BALANCE_UNAVAILABLE"})


def details(status: status_pb2.Status) -> tuple[str, dict[str, str], list[tuple[str, str]]]:
    """What a refusal's `google.rpc.Status` carries besides its code: its ErrorInfo's
    reason and metadata, and each field its BadRequest names with what is wrong."""
    reason, metadata, violations = "", {}, []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, metadata = info.reason, dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations = [(v.field, v.description) for v in bad.field_violations]
    return reason, metadata, violations


def reasons() -> list[str]:
    """Every reason of the contract's enum, without its prefix."""
    return [
        name.removeprefix("ERROR_REASON_")
        for name in error_reason_pb2.ErrorReason.keys()  # noqa: SIM118 (an enum wrapper)
        if name != "ERROR_REASON_UNSPECIFIED"
    ]


def status_of(reason: str, *, retry: bool = False) -> int:
    if retry and reason in AT_RETRY:
        return 409
    return STATUSES.get(reason, (500, ""))[0]


def refusal(
    reason: str,
    detail: str,
    *,
    status: int,
    fields: Sequence[str] = (),
    metadata: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The body of a REST refusal: a problem document, or the money wire's error."""
    if reason in MONEY:
        return {"error": {"code": reason.lower(), "message": detail}}
    title = STATUSES.get(reason, (status, "Error"))[1]
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + reason.lower().replace("_", "-"),
        "title": title,
        "status": status,
        "detail": detail,
        "code": reason.lower(),
    }
    if fields:
        body["fields"] = list(fields)
    extra = dict(metadata or {})
    if "supported" in extra:
        body["supported"] = [s for s in extra.pop("supported").split(",") if s]
    extra.pop("field", None)  # named in `fields`
    if extra:
        body["metadata"] = extra
    return body
