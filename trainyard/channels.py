"""The channel to the gateway, for the SDK and the executors alike, and the TLS settings
both use over `https://`: the CA to verify the gateway with (the system's by default;
verification is never off), and a client certificate where the gateway asks executors
for one (mutual TLS)."""

from __future__ import annotations

import dataclasses
import functools
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import grpc


@dataclasses.dataclass(frozen=True)
class Tls:
    """How a client verifies the gateway and, optionally, proves itself to it."""

    # PEM CA certificates to verify the gateway's certificate with; None: the system's.
    ca_file: Path | None = None
    # A PEM client certificate (chain) and its key, for a gateway that asks for one.
    cert_file: Path | None = None
    key_file: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Tls:
        """`TRAINYARD_CA_FILE`, `TRAINYARD_CLIENT_CERT` and `TRAINYARD_CLIENT_KEY`."""
        env = os.environ if env is None else env

        def path(name: str) -> Path | None:
            value = env.get(name, "").strip()
            return Path(value) if value else None

        return cls(
            path("TRAINYARD_CA_FILE"), path("TRAINYARD_CLIENT_CERT"), path("TRAINYARD_CLIENT_KEY")
        )

    def credentials(self) -> grpc.ChannelCredentials:
        read = lambda path: path.read_bytes() if path else None  # noqa: E731
        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca_file),
            private_key=read(self.key_file),
            certificate_chain=read(self.cert_file),
        )

    @functools.cached_property
    def context(self) -> ssl.SSLContext:
        """The same settings for HTTPS (httpx's `verify=`): download URLs name the gateway."""
        made = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        if self.cert_file:
            made.load_cert_chain(self.cert_file, self.key_file)
        return made


def channel(url: str, tls: Tls | None = None) -> grpc.Channel:
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
            f"{parts.hostname}:{parts.port or 443}", (tls or Tls()).credentials(), options
        )
    return grpc.insecure_channel(f"{parts.hostname}:{parts.port or 80}", options)
