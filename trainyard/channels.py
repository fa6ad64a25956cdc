"""The channel to the gateway, for the SDK and the executors alike."""

from __future__ import annotations

from urllib.parse import urlsplit

import grpc


def channel(url: str) -> grpc.Channel:
    """A channel to the gateway at `url` (`http://` or `https://`)."""
    parts = urlsplit(url)
    # HTTP/2 pings keep a long, quiet stream (an idle executor's) known to be alive, and
    # find a gateway that vanished without closing it. The gateway permits them.
    options = [
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    if parts.scheme == "https":
        return grpc.secure_channel(
            f"{parts.hostname}:{parts.port or 443}", grpc.ssl_channel_credentials(), options
        )
    return grpc.insecure_channel(f"{parts.hostname}:{parts.port or 80}", options)
