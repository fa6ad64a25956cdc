"""Certificates the stack makes itself: a CA and the leaves it signs (SeaweedFS's mutual
TLS, the gateway's self-signed pair for local use), and the gateway's TLS settings.

The gateway serves TLS from the certificate and key the operator names
(`TRAINYARD_TLS_CERT`, `TRAINYARD_TLS_KEY`), or from a pair made here on request
(`TRAINYARD_TLS_SELF_SIGNED=1`, kept in the home so clients keep trusting it). With
`TRAINYARD_TLS_CLIENT_CA` it also asks executors for a client certificate that CA signed,
besides their key (mutual TLS)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAYS = 3650


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    names: Iterable[str] = (),
    usages: Iterable[x509.ObjectIdentifier] = (
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
    ),
) -> x509.Certificate:
    """A certificate for `subject`: a CA when `issuer` is None, else a leaf it signs, valid
    for `names` (host names or IP addresses) and `usages`."""
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=DAYS))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        if alt := [_alt_name(n) for n in names]:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` with mode 0600, replacing it whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def self_signed(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """The gateway's certificate, key and the CA that signed it, under `directory`: made
    the first time and kept (the CA's key is thrown away once the one leaf is signed), for
    localhost, this machine's name, the loopback addresses and `host`. Clients trust the
    CA's certificate (`ca.pem`)."""
    cert, key, ca_file = directory / "gateway.pem", directory / "gateway.key", directory / "ca.pem"
    if cert.exists() and key.exists() and ca_file.exists():
        return cert, key, ca_file
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname()}
    if host not in ("", "0.0.0.0", "::"):
        names.add(host)
    ca_key = new_key()
    ca = certificate("trainyard local CA", ca_key, None, ca_key)
    made = new_key()
    leaf = certificate(
        "trainyard gateway", made, ca, ca_key, names=sorted(names),
        usages=(ExtendedKeyUsageOID.SERVER_AUTH,),
    )  # fmt: skip
    write_private(key, pem_key(made))
    write_private(cert, pem(leaf))
    write_private(ca_file, pem(ca))
    return cert, key, ca_file
