"""Moving an object's bytes under a grant: the one presigned PUT of a small object or one
PUT per 64 MiB part of a large one, and a download checked against its sha256."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

import httpx

from trainyard.artifact.v1 import artifact_pb2

# Connecting is quick or it fails; a part of 64 MiB may take minutes on a slow link.
TIMEOUT = httpx.Timeout(60.0, read=600.0, write=600.0)


class Mismatch(Exception):
    """Downloaded bytes that do not hash to the name they were asked for."""


def put(http: httpx.Client, grant: artifact_pb2.Grant, source: BinaryIO) -> None:
    """PUT the bytes the grant was made for; a refusal raises `httpx.HTTPStatusError`."""
    if grant.HasField("upload"):
        parts = [(0, -1, grant.upload.url, dict(grant.upload.headers))]
    else:
        parts = [(p.offset, p.size, p.url, dict(p.headers)) for p in grant.parts]
    for offset, length, url, headers in parts:
        source.seek(offset)
        http.put(url, content=source.read(length), headers=headers).raise_for_status()


def get(http: httpx.Client, artifact: artifact_pb2.Artifact) -> bytes:
    """The bytes behind a download URL, checked against the artifact's sha256."""
    data = http.get(artifact.url).raise_for_status().content
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise Mismatch()
    return data
