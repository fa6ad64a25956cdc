"""The gateway's TLS settings: the self-signed pair made on request, the refusals of a
configuration that cannot serve TLS, Envoy accepting the rendered listener, and `make up`'s
TLS variables."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest
from cryptography import x509

from gateway.render import GatewayTls, render
from infra import tls
from services.core.config import Config, ConfigError
from tests.support import assert_envoy_accepts

ROOT = Path(__file__).resolve().parents[2]
PORTS = {"jobs": 1, "claims": 2, "artifacts": 3, "meter": 4, "tinker": 5}


def test_the_self_signed_pair_verifies_for_loopback_and_is_kept(tmp_path: Path) -> None:
    cert_file, key_file, ca_file = tls.self_signed(tmp_path / "tls", "gateway.internal")
    leaf = x509.load_pem_x509_certificate(cert_file.read_bytes())
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert {"localhost", "gateway.internal"} <= set(names.get_values_for_type(x509.DNSName))
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    # Made once: a restart serves the same certificate, so clients keep trusting it.
    assert tls.self_signed(tmp_path / "tls", "gateway.internal") == (cert_file, key_file, ca_file)
    assert cert_file.read_bytes() == tls.pem(leaf)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"TRAINYARD_TLS_CERT": "cert"}, "go together"),
        ({"TRAINYARD_TLS_CLIENT_CA": "ca"}, "needs TLS"),
        ({"TRAINYARD_TLS_SELF_SIGNED": "1", "TRAINYARD_TLS_CERT": "cert",
          "TRAINYARD_TLS_KEY": "key"}, "makes the gateway's pair"),
        ({"TRAINYARD_TLS_CERT": "cert", "TRAINYARD_TLS_KEY": "missing"}, "names no readable file"),
    ],
)  # fmt: skip
def test_a_configuration_that_cannot_serve_tls_is_refused_by_name(
    tmp_path: Path, settings: dict[str, str], said: str
) -> None:
    for name in ("cert", "key", "ca"):
        (tmp_path / name).write_text("-")
    env = {"TRAINYARD_HOME": str(tmp_path / "home")}
    env |= {
        k: str(tmp_path / v) if k != "TRAINYARD_TLS_SELF_SIGNED" else v for k, v in settings.items()
    }
    with pytest.raises(ConfigError, match=said):
        Config.from_env(env)


@pytest.mark.parametrize("client_ca", [False, True])
def test_envoy_accepts_the_tls_listener(tmp_path: Path, client_ca: bool) -> None:
    cert, key, ca = tls.self_signed(tmp_path / "tls", "127.0.0.1")
    config = render(
        listen_host="127.0.0.1", listen_port=18443, admin_port=18444, admin_socket=tmp_path / "a",
        ports=PORTS, tls=GatewayTls(cert, key, ca, ca if client_ca else None), internal_port=18445,
    )  # fmt: skip
    assert "DownstreamTlsContext" in config and "name: internal" in config
    assert ("envoy.filters.http.rbac" in config) is client_ca
    assert_envoy_accepts(config, tmp_path)


def test_plain_http_renders_no_tls_and_no_second_listener(tmp_path: Path) -> None:
    config = render(
        listen_host="127.0.0.1", listen_port=18443, admin_port=18444, admin_socket=tmp_path / "a",
        ports=PORTS,
    )  # fmt: skip
    assert "DownstreamTlsContext" not in config and "name: internal" not in config


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["TLS=self-signed"], "TRAINYARD_TLS_SELF_SIGNED=1"),
        (["TLS_CERT=c.pem", "TLS_KEY=k.pem"], "TRAINYARD_TLS_CERT=c.pem TRAINYARD_TLS_KEY=k.pem"),
    ],
)
def test_make_up_passes_its_tls_variables_to_the_stack(args: list[str], env: str) -> None:
    planned = subprocess.run(
        ["make", "-n", "up", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    (start,) = [line for line in planned if line.endswith("trainyard up")]
    assert env in start
