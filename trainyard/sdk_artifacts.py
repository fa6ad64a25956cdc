"""The SDK's artifact calls: upload a file (hashed, granted, PUT to the object store and
verified there), read, list, download (verified before it lands), unpack a job's result,
pin, unpin, keep longer, delete, and a job's outputs and provenance. `trainyard.sdk.Client` has them all."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import httpx

from trainyard import packing
from trainyard.artifact.v1 import artifact_pb2, artifact_service_pb2, provenance_pb2
from trainyard.channels import Tls
from trainyard.job.v1 import job_pb2
from trainyard.sdk_base import Calls, TrainyardError


class ArtifactMethods(Calls):
    """The artifact calls of `Client`, which supplies `get_job` and `tls` too."""

    tls: Tls

    def get_job(self, job_id: str, *, by_number: bool = False, project: str = "") -> job_pb2.Job:
        raise NotImplementedError

    def upload(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        kind: str = "dataset",
        progress: Callable[[int, int], None] | None = None,
    ) -> artifact_pb2.Artifact:
        """Hash a file, ask for a grant, PUT the bytes (unless the org holds them already),
        and have the service read them back and verify them (a dataset is refused there,
        and deleted, unless its rows are ones a job can train on)."""
        path = Path(path)
        sha256, size = file_sha256(path)
        grant = self._call(
            "CreateArtifact",
            artifact_service_pb2.CreateArtifactRequest(
                kind=kind, name=name or _safe_name(path), sha256=sha256, size=size
            ),
        )
        if not grant.stored:
            transfers = (
                [(0, size, grant.upload.url, dict(grant.upload.headers))]
                if grant.HasField("upload")
                else [(p.offset, p.size, p.url, dict(p.headers)) for p in grant.parts]
            )
            sent = 0
            with httpx.Client(
                timeout=httpx.Timeout(60.0, read=600.0), verify=self.tls.context
            ) as http:
                for offset, length, url, headers in transfers:

                    def body(offset: int = offset, length: int = length) -> Iterator[bytes]:
                        nonlocal sent
                        with path.open("rb") as fh:
                            fh.seek(offset)
                            left = length
                            while left:
                                chunk = fh.read(min(1 << 20, left))
                                left -= len(chunk)
                                sent += len(chunk)
                                if progress:
                                    progress(sent, size)
                                yield chunk

                    try:
                        answer = http.put(url, content=body(), headers=headers)
                    except httpx.TransportError:
                        raise _unreachable_store() from None
                    if answer.status_code >= 300:
                        raise TrainyardError(
                            grpc.StatusCode.FAILED_PRECONDITION,
                            "UPLOAD_REFUSED",
                            f"The object store refused the upload ({answer.status_code}).",
                            {},
                        )
        elif progress:
            progress(size, size)
        return self._call(
            "ConfirmArtifact",
            artifact_service_pb2.ConfirmArtifactRequest(sha256=sha256),
            timeout=600,
        )

    def get_artifact(self, sha256: str) -> artifact_pb2.Artifact:
        return self._call("GetArtifact", artifact_service_pb2.GetArtifactRequest(sha256=sha256))

    def list_artifacts(self, *, kind: str = "") -> Iterator[artifact_pb2.Artifact]:
        token = ""
        while True:
            page = self._call(
                "ListArtifacts",
                artifact_service_pb2.ListArtifactsRequest(kind=kind, page_token=token),
            )
            yield from page.artifacts
            token = page.next_page_token
            if not token:
                return

    def download(
        self,
        sha256: str,
        target: str | os.PathLike[str],
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> Path:
        """Download an object and verify its sha256 before it lands at `target`; nothing
        is left behind when it does not verify."""
        target = Path(target)
        artifact = self.get_artifact(sha256)
        partial = target.with_name(target.name + ".partial")
        digest, got = hashlib.sha256(), 0
        try:
            with httpx.stream("GET", artifact.url, timeout=600, verify=self.tls.context) as answer:
                if answer.status_code >= 300:
                    raise _refused_download(answer)
                with partial.open("wb") as fh:
                    for chunk in answer.iter_bytes(1 << 20):
                        fh.write(chunk)
                        digest.update(chunk)
                        got += len(chunk)
                        if progress:
                            progress(got, int(artifact.size))
        except httpx.TransportError:
            partial.unlink(missing_ok=True)
            raise _unreachable_store() from None
        if digest.hexdigest() != sha256:
            partial.unlink(missing_ok=True)
            raise TrainyardError(
                grpc.StatusCode.DATA_LOSS,
                "ARTIFACT_MISMATCH",
                "The downloaded bytes do not have the sha256 asked for; nothing was kept.",
                {"sha256": sha256},
            )
        partial.replace(target)
        return target

    def download_job(
        self,
        job_id: str,
        directory: str | os.PathLike[str],
        *,
        state: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Path:
        """Download a job's result (`state`: its resumable training state instead), verify
        its sha256 and unpack it into `directory`, which must not exist or be empty. It is
        unpacked beside it first and moved there whole, so a failed download, check or
        unpack leaves nothing. Raises `RESULT_UNAVAILABLE` (or `CHECKPOINT_UNAVAILABLE`)
        while the job has none."""
        directory = Path(directory)
        result = self.get_job(job_id).result
        sha256 = result.checkpoint_sha256 if state else result.sha256
        if not sha256:
            what = "resumable state" if state else "result"
            raise TrainyardError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "CHECKPOINT_UNAVAILABLE" if state else "RESULT_UNAVAILABLE",
                f"The job has no verified {what} to download (yet).",
                {"job": job_id},
            )
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise FileExistsError(f"{directory} exists and is not an empty directory")
        directory.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(
            prefix=f".{directory.name}.", dir=directory.parent
        ) as work:
            packed = self.download(sha256, Path(work) / "packed.tar", progress=progress)
            try:
                with packed.open("rb") as fh:
                    packing.unpack(fh, Path(work) / "files")
            except packing.UnsafeArchive:
                raise TrainyardError(
                    grpc.StatusCode.DATA_LOSS,
                    "ARTIFACT_UNPACKABLE",
                    "The object is not a directory packed as a job's output; nothing was kept.",
                    {"sha256": sha256},
                ) from None
            os.replace(Path(work) / "files", directory)
        return directory

    def delete_artifact(self, sha256: str) -> bool:
        return bool(
            self._call(
                "DeleteArtifact", artifact_service_pb2.DeleteArtifactRequest(sha256=sha256)
            ).deleted
        )

    def pin_artifact(self, sha256: str) -> artifact_pb2.Artifact:
        """Pin an object: it never expires, and no sweep deletes it, until it is unpinned."""
        return self._call("PinArtifact", artifact_service_pb2.PinArtifactRequest(sha256=sha256))

    def unpin_artifact(self, sha256: str) -> artifact_pb2.Artifact:
        """Unpin an object: its retention applies again."""
        return self._call("UnpinArtifact", artifact_service_pb2.UnpinArtifactRequest(sha256=sha256))

    def extend_artifact(self, sha256: str, ttl_seconds: int) -> artifact_pb2.Artifact:
        """Keep an object until `ttl_seconds` from now (never sooner than it is kept already,
        at most its retention class's greatest TTL); no byte is copied."""
        return self._call(
            "ExtendArtifact",
            artifact_service_pb2.ExtendArtifactRequest(sha256=sha256, ttl_seconds=ttl_seconds),
        )

    def job_artifacts(self, job_id: str) -> list[artifact_pb2.Artifact]:
        return list(
            self._call(
                "ListJobArtifacts", artifact_service_pb2.ListJobArtifactsRequest(id=job_id)
            ).artifacts
        )

    def provenance(self, job_id: str) -> provenance_pb2.ProvenanceRecord:
        return self._call(
            "GetJobProvenance", artifact_service_pb2.GetJobProvenanceRequest(id=job_id)
        )


def _refused_download(answer: httpx.Response) -> TrainyardError:
    """A download the gateway refused, by the reason its problem document names, spelled
    as gRPC spells reasons (an expired URL is `NOT_FOUND`, bytes the store holds wrong
    `ARTIFACT_MISMATCH`)."""
    answer.read()
    try:
        code = str(answer.json()["code"]).upper()
    except (ValueError, KeyError, TypeError):
        code = "DOWNLOAD_REFUSED"
    return TrainyardError(
        grpc.StatusCode.UNAVAILABLE,
        code if code.replace("_", "").isalnum() else "DOWNLOAD_REFUSED",
        f"The download was refused ({answer.status_code}); nothing was kept.",
        {},
    )


def _unreachable_store() -> TrainyardError:
    return TrainyardError(
        grpc.StatusCode.UNAVAILABLE,
        "OBJECT_STORE_UNREACHABLE",
        "The object store named by the grant did not answer.",
        {},
    )


def file_sha256(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _safe_name(path: Path) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in path.name).lstrip(".-_")
    return cleaned[:128] or "upload"
