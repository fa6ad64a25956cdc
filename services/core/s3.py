"""The one way the deployment talks S3: path-style, SigV4, checksums only where S3 requires
them (as SeaweedFS expects). ArtifactService's objects and the operator's store use it."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config as BotoConfig


def client(
    endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1", attempts: int = 3
) -> Any:
    """`attempts`: how many times botocore sends a call that failed on its way or with a
    5xx before it raises (1: the caller retries on its own clock)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=BotoConfig(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": attempts, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )
