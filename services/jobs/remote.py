"""Datasets read from outside the deployment: `s3://<bucket>/<key>` from an S3 endpoint
the org registered (`data_sources`), and `hf://datasets/<owner>/<name>[@<revision>]/<path>`
through `huggingface_hub`, which honours `HF_ENDPOINT`, `HF_HUB_OFFLINE`, `HF_HUB_CACHE`
and `HF_TOKEN` from the deployment's environment.

A create reads the bytes and records what it read on the job's dataset (the hf commit or
the S3 ETag, and the bytes' sha256); preparation reads them again pinned to that record
(the commit; `If-Match` on the ETag) and snapshots them only when their sha256 agrees, so
the rows a job was admitted on are the rows it trains on, and every retry reads the
snapshot. A read that fails is refused with a category and a fixed sentence: never the
uri, the endpoint, a key or a secret."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import PurePosixPath
from typing import Protocol

from services.core import errors
from services.core.datasets import MAX_DATASET_BYTES
from services.jobs.data_sources import Credentials
from trainyard.job.v1 import job_pb2

S3_URI = re.compile(
    r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[!-~][ -~]{0,1023})$"
)
SCHEMES = ("s3", "hf")

# What each category of failed read tells the user; never what was named.
PROBLEMS = {
    "credentials": "could not be read: the source refused the credentials",
    "not_found": "could not be read: the source holds no such object",
    "revision": "could not be read: the repository has no such revision",
    "unreachable": "could not be read: the source could not be reached",
    "too_large": "names an object too large to train on",
    "changed": "changed after the job was created",
}


class Unreadable(errors.ValidationError):
    """A dataset the source would not give: `dataset.uri` with its `category`."""

    def __init__(self, category: str) -> None:
        super().__init__("dataset.uri", PROBLEMS[category], metadata={"category": category})
        self.category = category


@dataclasses.dataclass(frozen=True)
class Fetched:
    data: bytes
    revision: str


class SourceCredentials(Protocol):
    def credentials(self, org: str, name: str) -> Credentials: ...


def is_remote(uri: str) -> bool:
    return uri.startswith(("s3://", "hf://"))


def check_uri(dataset: job_pb2.Dataset) -> None:
    """Refuse a remote uri that is not well formed, and `source` where it does not belong."""
    if dataset.uri.startswith("s3://"):
        if not S3_URI.fullmatch(dataset.uri):
            raise errors.ValidationError("dataset.uri", "must name an S3 bucket and key")
        if not dataset.source:
            raise errors.ValidationError("dataset.source", "is required for an S3 uri")
    elif dataset.source:
        raise errors.ValidationError("dataset.source", "applies only to an S3 uri")
    if dataset.uri.startswith("hf://"):
        hf_parts(dataset.uri)


def hf_parts(uri: str) -> tuple[str, str | None, str]:
    """The repository, revision and file an `hf://` dataset uri names."""
    from huggingface_hub import parse_hf_uri
    from huggingface_hub.errors import HfUriError

    try:
        parsed = parse_hf_uri(uri)
    except (HfUriError, ValueError):
        parsed = None
    path = PurePosixPath(parsed.path_in_repo) if parsed is not None else None
    if (
        parsed is None
        or path is None
        or parsed.type != "dataset"
        or not parsed.path_in_repo
        or path.is_absolute()
        or ".." in path.parts
    ):
        raise errors.ValidationError(
            "dataset.uri", "must name a Hub dataset, an optional revision and a file in it"
        )
    return parsed.id, parsed.revision, parsed.path_in_repo


def fetch(dataset: job_pb2.Dataset, org: str, sources: SourceCredentials) -> bytes:
    """The dataset's bytes. A dataset a create has not read yet gets its record (revision
    and sha256); one it has is read pinned to it, and refused `changed` if it differs."""
    pin = dataset.resolved_revision or None
    if dataset.uri.startswith("s3://"):
        got = read_s3(dataset.uri, sources.credentials(org, dataset.source), pin)
    else:
        got = read_hf(dataset.uri, pin)
    digest = hashlib.sha256(got.data).hexdigest()
    if dataset.source_sha256 and dataset.source_sha256 != digest:
        raise Unreadable("changed")
    dataset.resolved_revision, dataset.source_sha256 = got.revision, digest
    return got.data


def read_s3(uri: str, creds: Credentials, etag: str | None) -> Fetched:
    from botocore.exceptions import BotoCoreError, ClientError

    from services.core import s3

    found = S3_URI.fullmatch(uri)
    assert found is not None
    client = s3.client(creds.endpoint, creds.access_key_id, creds.secret_access_key, creds.region)
    try:
        answer = client.get_object(
            Bucket=found["bucket"], Key=found["key"], **({"IfMatch": f'"{etag}"'} if etag else {})
        )
        if int(answer.get("ContentLength", 0)) > MAX_DATASET_BYTES:
            raise Unreadable("too_large")
        data = answer["Body"].read()
    except ClientError as exc:
        raise Unreadable(_s3_category(exc)) from None
    except (BotoCoreError, ValueError):
        raise Unreadable("unreachable") from None
    return Fetched(data, str(answer.get("ETag", "")).strip('"'))


def _s3_category(exc: Exception) -> str:
    response = getattr(exc, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in ("PreconditionFailed",) or status == 412:
        return "changed"
    if code in ("NoSuchKey", "NoSuchBucket", "NotFound") or status == 404:
        return "not_found"
    if status in (401, 403) or code in (
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
    ):
        return "credentials"
    return "unreachable"


def read_hf(uri: str, pin: str | None) -> Fetched:
    from huggingface_hub import errors as hf
    from huggingface_hub import hf_hub_download

    repo, revision, path = hf_parts(uri)
    try:
        local = hf_hub_download(
            repo_id=repo, filename=path, repo_type="dataset", revision=pin or revision
        )
    except hf.RevisionNotFoundError:
        raise Unreadable("revision") from None
    except hf.GatedRepoError:
        raise Unreadable("credentials") from None
    except (hf.RepositoryNotFoundError, hf.RemoteEntryNotFoundError):
        raise Unreadable("not_found") from None
    except hf.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", 0)
        raise Unreadable("credentials" if status in (401, 403) else "unreachable") from None
    except (hf.LocalEntryNotFoundError, hf.OfflineModeIsEnabled, OSError, ValueError):
        # Offline with nothing cached, or the Hub unreachable.
        raise Unreadable("unreachable") from None
    if os.path.getsize(local) > MAX_DATASET_BYTES:
        raise Unreadable("too_large")
    with open(local, "rb") as fh:
        data = fh.read()
    return Fetched(data, _commit_of(local, path))


def _commit_of(local: str, path: str) -> str:
    """The commit a file of huggingface_hub's cache belongs to: the directory its path in
    the repository hangs from (`snapshots/<commit>/<path>`)."""
    return PurePosixPath(local).parts[-len(PurePosixPath(path).parts) - 1]
