"""TLS as an operator turns it on: the gateway serves the certificate and key the operator
names; `curl`, the CLI, the SDK and executors verify it against the CA they are given and
refuse it without; an executor shows a client certificate besides its key where the gateway
asks for one (mutual TLS), and one without is told so at once. Plain HTTP stays the local
default and says so at start."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from infra import tls
from tests.support import StackProcess, bearer, org_executor, wait_for_job
from trainyard import sdk
from trainyard.channels import Tls

JOB = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "hyperparameters": {"max_steps": 3},
}


class Pki:
    """A CA for the gateway's certificate and another for executors' client certificates,
    as an operator's own would be."""

    def __init__(self, root: Path) -> None:
        self.root = root
        server_ca_key = tls.new_key()
        server_ca = tls.certificate("operator CA", server_ca_key, None, server_ca_key)
        key = tls.new_key()
        leaf = tls.certificate(
            "trainyard.test", key, server_ca, server_ca_key, names=["127.0.0.1", "localhost"],
            usages=(ExtendedKeyUsageOID.SERVER_AUTH,),
        )  # fmt: skip
        self.ca, self.cert, self.key = root / "ca.pem", root / "gateway.pem", root / "gateway.key"
        tls.write_private(self.ca, tls.pem(server_ca))
        tls.write_private(self.cert, tls.pem(leaf))
        tls.write_private(self.key, tls.pem_key(key))
        client_ca_key = tls.new_key()
        client_ca = tls.certificate("executors CA", client_ca_key, None, client_ca_key)
        self.client_ca = root / "clients-ca.pem"
        tls.write_private(self.client_ca, tls.pem(client_ca))
        executor_key = tls.new_key()
        executor = tls.certificate(
            "gpu-box-1", executor_key, client_ca, client_ca_key,
            usages=(ExtendedKeyUsageOID.CLIENT_AUTH,),
        )  # fmt: skip
        self.client_cert, self.client_key = root / "executor.pem", root / "executor.key"
        tls.write_private(self.client_cert, tls.pem(executor))
        tls.write_private(self.client_key, tls.pem_key(executor_key))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[StackProcess]:
    env = {
        "TRAINYARD_TLS_CERT": str(pki.cert),
        "TRAINYARD_TLS_KEY": str(pki.key),
        "TRAINYARD_TLS_CA": str(pki.ca),
        "TRAINYARD_TLS_CLIENT_CA": str(pki.client_ca),
    }
    running = StackProcess(tmp_path_factory.mktemp("tls") / "home", env=env).start()
    try:
        yield running
    finally:
        running.stop()


def https(stack: StackProcess) -> str:
    return f"https://127.0.0.1:{stack.port}"


def test_the_gateway_serves_tls_and_every_client_verifies_it(stack: StackProcess, pki: Pki) -> None:
    url = https(stack)
    log = stack.log_path.read_text()
    assert f"gateway  {url}" in log and f"clients verify it with --ca-file {pki.ca}" in log
    key = stack.create_key("acme", "member")
    # curl: verified against the operator's CA, refused without it (60: peer's certificate).
    models = f"{url}/v1/train/models"
    ok = subprocess.run(
        ["curl", "-sf", "--cacert", str(pki.ca), "-H", f"Authorization: Bearer {key}", models],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert ok.returncode == 0 and '"fixture-tiny-llm"' in ok.stdout
    assert subprocess.run(["curl", "-s", models], timeout=30).returncode == 60
    # Plain HTTP is not served on the TLS port.
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{stack.port}/v1/train/models", headers=bearer(key))
    # The CLI, with and without the CA.
    refused = stack.cli("--url", url, "models", key=key, check=False)
    assert refused.returncode == 4 and "did not verify" in refused.stderr
    listed = stack.cli("--url", url, "--ca-file", str(pki.ca), "models", key=key)
    assert "fixture-tiny-llm" in listed.stdout
    # The SDK, gRPC over TLS.
    with sdk.Client(url, key, tls=Tls(ca_file=pki.ca)) as client:
        assert "fixture-tiny-llm" in {m.name for m in client.models()}


def test_an_executor_shows_its_client_certificate_besides_its_key(
    stack: StackProcess, pki: Pki, tmp_path: Path
) -> None:
    url = https(stack)
    member = stack.create_key("acme", "member")
    machine_key = stack.create_key("acme", "executor")
    env = {"TRAINYARD_URL": url, "TRAINYARD_CA_FILE": str(pki.ca), "TRAINYARD_HOME": str(tmp_path)}
    # Without a certificate: refused at once, saying what to give.
    log = tmp_path / "refused.log"
    with org_executor(stack, machine_key, "gpu-box-1", log, "--no-warm", env=env) as process:
        assert process.wait(timeout=60) == 1
    assert "shows no client certificate" in log.read_text()
    # A REST executor is refused as plainly, in the gateway's problem document.
    claim = httpx.post(
        f"{url}/v1/train/jobs/claim", json={"machine": "gpu-box-1"}, headers=bearer(machine_key),
        verify=Tls(ca_file=pki.ca).context,
    )  # fmt: skip
    assert claim.status_code == 403 and claim.json()["code"] == "permission_denied", claim.text
    assert "client certificate" in claim.json()["detail"]
    # With it: the executor claims the org's job and trains it; its output downloads.
    certified = (
        "--no-warm",
        "--client-cert",
        str(pki.client_cert),
        "--client-key",
        str(pki.client_key),
    )
    with org_executor(stack, machine_key, "gpu-box-1", tmp_path / "ok.log", *certified, env=env):
        trust = Tls(ca_file=pki.ca).context
        with httpx.Client(base_url=url, headers=bearer(member), timeout=60, verify=trust) as api:
            created = api.post(
                "/v1/train/jobs", json={**JOB, "resources": {"machines": ["gpu-box-1"]}}
            )
            assert created.status_code == 200, created.text
            done = wait_for_job(
                api, created.json()["id"], lambda j: j["status"] in ("succeeded", "failed")
            )
            assert done["status"] == "succeeded", done
            artifact = api.get(f"/v1/train/artifacts/{done['result']['sha256']}").json()
            assert artifact["url"].startswith(f"{url}/v1/train/downloads/")
            body = httpx.get(artifact["url"], verify=trust, timeout=60).content
            assert hashlib.sha256(body).hexdigest() == done["result"]["sha256"]


def test_plain_http_is_the_local_default_and_says_so(session_stack: StackProcess) -> None:
    assert "plain HTTP, the local default" in session_stack.log_path.read_text()
    assert session_stack.url.startswith("http://")
