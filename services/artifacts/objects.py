"""The S3 store through boto3: presigned transfers, verified reads, read-back, deletion.
Keys are `<org>/<sha256>`; every call carries the object's SSE-C key."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
from collections.abc import Iterator
from typing import Any

import grpc
from botocore.exceptions import ClientError

from services.artifacts.crypto import SSE_ALGORITHM, sse_headers
from services.core import errors
from services.core.config import Config
from services.core.s3 import client as s3_client

PART_SIZE = 64 * 1024 * 1024
CHUNK = 1024 * 1024
# The largest object read whole and checked before any of it is served.
VERIFY_FIRST = 64 * 1024 * 1024


class ObjectMismatch(errors.DomainError):
    """The store answered an object with bytes whose sha256 is not its name."""

    code = grpc.StatusCode.DATA_LOSS
    reason = "ARTIFACT_MISMATCH"
    message = "The stored object does not match its sha256 and was not served."


@dataclasses.dataclass(frozen=True)
class Presigned:
    url: str
    headers: dict[str, str]


@dataclasses.dataclass(frozen=True)
class ReadBack:
    sha256: str
    size: int
    encrypted: bool
    data: bytes | None = None  # the plaintext, when the read was asked to keep it


class ObjectStore:
    """One bucket of an S3 endpoint; presigned URLs name the endpoint clients reach."""

    def __init__(self, config: Config) -> None:
        self.bucket = config.s3_bucket
        args = (config.s3_access_key, config.s3_secret_key, config.s3_region)
        self._s3 = s3_client(config.s3_endpoint, *args)
        self._presigner = s3_client(config.s3_public_endpoint or config.s3_endpoint, *args)

    @staticmethod
    def key(org: str, sha256: str) -> str:
        return f"{org}/{sha256}"

    @staticmethod
    def _sse(key: bytes) -> dict[str, Any]:
        return {"SSECustomerAlgorithm": SSE_ALGORITHM, "SSECustomerKey": key}

    def presign_put(
        self, org: str, sha256: str, size: int, key: bytes, content_type: str, seconds: int
    ) -> Presigned:
        checksum = base64.b64encode(bytes.fromhex(sha256)).decode()
        url = self._presigner.generate_presigned_url(
            "put_object",
            Params={
                "Bucket": self.bucket,
                "Key": self.key(org, sha256),
                "ContentLength": size,
                "ChecksumSHA256": checksum,
                "ContentType": content_type,
                **self._sse(key),
            },
            ExpiresIn=seconds,
        )
        headers = {
            "content-length": str(size),
            "content-type": content_type,
            "x-amz-checksum-sha256": checksum,
            **sse_headers(key),
        }
        return Presigned(url, headers)

    def start_multipart(self, org: str, sha256: str, key: bytes, content_type: str) -> str:
        answer = self._s3.create_multipart_upload(
            Bucket=self.bucket,
            Key=self.key(org, sha256),
            ContentType=content_type,
            **self._sse(key),
        )
        return str(answer["UploadId"])

    def presign_part(
        self,
        org: str,
        sha256: str,
        upload_id: str,
        number: int,
        size: int,
        key: bytes,
        seconds: int,
    ) -> Presigned:
        url = self._presigner.generate_presigned_url(
            "upload_part",
            Params={
                "Bucket": self.bucket,
                "Key": self.key(org, sha256),
                "UploadId": upload_id,
                "PartNumber": number,
                "ContentLength": size,
                **self._sse(key),
            },
            ExpiresIn=seconds,
        )
        return Presigned(url, {"content-length": str(size), **sse_headers(key)})

    def complete_multipart(self, org: str, sha256: str, upload_id: str, key: bytes) -> bool:
        """Assemble the parts the client put; False when any is missing."""
        try:
            listed = self._s3.list_parts(
                Bucket=self.bucket, Key=self.key(org, sha256), UploadId=upload_id
            )
        except ClientError:
            return False
        parts = [
            {"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in listed.get("Parts", [])
        ]
        if not parts:
            return False
        self._s3.complete_multipart_upload(
            Bucket=self.bucket,
            Key=self.key(org, sha256),
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
            **self._sse(key),
        )
        return True

    def abort_multipart(self, org: str, sha256: str, upload_id: str) -> None:
        with contextlib.suppress(ClientError):
            self._s3.abort_multipart_upload(
                Bucket=self.bucket, Key=self.key(org, sha256), UploadId=upload_id
            )

    def presign_get(self, org: str, sha256: str, key: bytes, seconds: int) -> Presigned:
        """A GET of the object straight from the store, under its SSE-C headers: how the
        store itself is checked. Clients download through `downloads.py`'s URLs."""
        url = self._presigner.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": self.key(org, sha256), **self._sse(key)},
            ExpiresIn=seconds,
        )
        return Presigned(url, sse_headers(key))

    def exists(self, org: str, sha256: str, key: bytes) -> bool:
        try:
            self._s3.head_object(Bucket=self.bucket, Key=self.key(org, sha256), **self._sse(key))
            return True
        except ClientError:
            return False

    def _body(self, org: str, sha256: str, key: bytes) -> Iterator[bytes]:
        """The bytes as stored, unchecked."""
        answer = self._s3.get_object(
            Bucket=self.bucket, Key=self.key(org, sha256), **self._sse(key)
        )
        body = answer["Body"]
        try:
            yield from iter(lambda: body.read(CHUNK), b"")
        finally:
            body.close()

    def stream(self, org: str, sha256: str, key: bytes) -> Iterator[bytes]:
        """The object's bytes, only if they are the ones its name promises: the store's
        bytes are not trusted (anything that can write to it could plant others). An
        object up to `VERIFY_FIRST` is hashed whole before its first byte leaves, so a
        mismatch is a plain refusal; a larger one flows as it is read with its last chunk
        held back until the whole hashed right, so a reader never has every byte of an
        object that does not verify."""
        digest = hashlib.sha256()
        held: list[bytes] = []
        size = 0
        for chunk in self._body(org, sha256, key):
            digest.update(chunk)
            size += len(chunk)
            held.append(chunk)
            if size > VERIFY_FIRST:
                yield from held[:-1]
                del held[:-1]
        if digest.hexdigest() != sha256:
            raise ObjectMismatch()
        yield from held

    def read_back(
        self, org: str, sha256: str, key: bytes, *, keep: bool = False
    ) -> ReadBack | None:
        """Hash the object as stored, keeping its bytes too when `keep` (so one read both
        verifies and checks them); None when it is not there under this key."""
        try:
            head = self._s3.head_object(
                Bucket=self.bucket, Key=self.key(org, sha256), **self._sse(key)
            )
        except ClientError:
            return None
        digest, size, kept = hashlib.sha256(), 0, []
        for chunk in self._body(org, sha256, key):
            digest.update(chunk)
            size += len(chunk)
            if keep:
                kept.append(chunk)
        encrypted = head.get("SSECustomerAlgorithm") == SSE_ALGORITHM
        return ReadBack(digest.hexdigest(), size, encrypted, b"".join(kept) if keep else None)

    def upload(self, org: str, sha256: str, key: bytes, source: Any) -> None:
        """Store the bytes a file-like `source` reads under the object's SSE-C key
        (multipart past a part's size), as a restore does; a grant's upload goes straight
        from the client instead."""
        self._s3.upload_fileobj(
            source, self.bucket, self.key(org, sha256), ExtraArgs=self._sse(key)
        )

    def delete(self, org: str, sha256: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=self.key(org, sha256))
