"""The families users bring (issue 29 items 1 and 2), over REST through the gateway on a
stack (SQLite, then PostgreSQL) whose models directory holds a tiny random model of each: the catalog names each
base's modules and its family's targets; a LoRA job and a full job of each family train
with the loss falling and reload with transformers and peft to the trainer's probe; a
training client loads each; and a base whose files change after a job pinned them fails
that job as `base_changed`. Every family trains on SQLite; on PostgreSQL one does, since
the store holds the same rows whatever the family."""

from __future__ import annotations

import contextlib
import io
import re
import secrets
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from safetensors.torch import load_file

from bench.stack import postgres_schema
from tests.conftest import PG_URL, database_params
from tests.e2e.test_clients import Org
from tests.families import FAMILIES, make_family_model
from tests.support import StackProcess, bearer, org_executor, wait_for_job
from trainyard.training import pins

ENDED = ("succeeded", "failed", "cancelled", "stopped", "rejected")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
ON_POSTGRES = "llama"


@pytest.fixture(scope="module", params=database_params())
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackProcess]:
    """One stack for every family, on SQLite and again on a PostgreSQL schema of its own:
    its models directory holds a model of each."""
    with contextlib.ExitStack() as scope:
        env = {}
        if request.param != "sqlite":
            env["TRAINYARD_DATABASE_URL"] = scope.enter_context(postgres_schema(PG_URL))
        home = tmp_path_factory.mktemp(f"families-{request.param}") / "home"
        for family in FAMILIES:
            make_family_model(home / "models" / f"tiny-{family}", family)
        running = StackProcess(home, env=env).start()
        scope.callback(running.stop)
        yield running


@pytest.fixture(scope="module")
def api(stack: StackProcess) -> httpx.Client:
    return stack.member_client()


def test_the_models_list_names_each_bases_modules_and_default_targets(
    stack: StackProcess, api: httpx.Client
) -> None:
    listed = {m["name"]: m for m in api.get("/v1/train/models").json()["models"]}
    for family in FAMILIES:
        model = listed[f"tiny-{family}"]
        support = model["support"]
        assert model["revision"] == pins.revision(stack.home / "models" / f"tiny-{family}")
        fused = family == "phi3"
        assert support["default_targets"] == (["qkv_proj"] if fused else ["q_proj", "v_proj"])
        assert set(support["default_targets"]) <= set(support["targets"])
        assert ("gate_up_proj" in support["targets"]) is fused
    # The built-in base names its own, too.
    assert listed["fixture-tiny-llm"]["support"]["default_targets"] == ["q_proj", "v_proj"]
    # `trainyard models` prints the same answer.
    printed = stack.cli("models", key=stack.create_key(f"cli-{secrets.token_hex(3)}")).stdout
    assert "tiny-phi3" in printed and "gate_up_proj" in printed and "default_targets" in printed


def job_body(base: str, mode: str) -> dict[str, Any]:
    rate = 0.01 if mode == "lora" else 0.002
    return {
        "base_model": base,
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "adaptation": {"mode": mode},
        "hyperparameters": {"max_steps": 6, "save_steps": 6, "learning_rate": rate},
        "resources": {"budget": 100},
    }


def loss_of(api: httpx.Client, job_id: str) -> dict[int, float]:
    series = api.get(f"/v1/train/jobs/{job_id}/metrics", params={"names": "loss"}).json()
    return {p["step"]: p["value"] for p in series["series"][0]["points"]}


def download(api: httpx.Client, sha256: str, into: Path) -> Path:
    """The job's output as a user fetches it: the artifact's URL, unpacked."""
    artifact = api.get(f"/v1/train/artifacts/{sha256}").json()
    with tarfile.open(fileobj=io.BytesIO(httpx.get(artifact["url"]).content)) as tar:
        tar.extractall(into, filter="data")
    return into


def reloaded(base: Path, output: Path, mode: str) -> torch.nn.Module:
    """The output loaded as transformers and peft load it, outside Trainyard."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    if mode == "full":
        return AutoModelForCausalLM.from_pretrained(str(output))
    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(output))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_family_trains_lora_and_full_reloads_and_serves_a_client(
    stack: StackProcess, api: httpx.Client, family: str, tmp_path: Path
) -> None:
    if stack.database_url.startswith("postgresql") and family != ON_POSTGRES:
        pytest.skip(f"on PostgreSQL only {ON_POSTGRES} trains: the store does not change a family")
    name = f"tiny-{family}"
    base = stack.home / "models" / name
    created = {}
    for mode in ("lora", "full"):
        answer = api.post("/v1/train/jobs", json=job_body(name, mode))
        assert answer.status_code == 200, answer.text
        created[mode] = answer.json()
    for mode, job in created.items():
        assert job["revision"] == pins.revision(base)  # pinned at create
        done = wait_for_job(api, job["id"], lambda j: j["status"] in ENDED)
        assert done["status"] == "succeeded", (mode, done.get("failure_message"))
        loss = loss_of(api, job["id"])
        assert sorted(loss) == list(range(1, 7)) and loss[6] < loss[1], (mode, loss)
        record = api.get(f"/v1/train/jobs/{job['id']}/provenance").json()
        assert SHA256.match(record["base_model_sha256"])  # the weights that trained
        output = download(api, done["result"]["sha256"], tmp_path / mode)
        probe = load_file(str(output / "probe.safetensors"))
        model = reloaded(base, output, mode).eval()
        with torch.no_grad():
            logits = model(input_ids=probe["input_ids"]).logits
        assert torch.allclose(logits, probe["logits"], atol=1e-5), mode
    adapter = created["lora"]["adaptation"]
    assert adapter["targets"] == (["qkv_proj"] if family == "phi3" else ["q_proj", "v_proj"])

    org = Org(stack)
    try:
        client = org.operator.post("/v1/train/clients", json={"base_model": name}).json()
        assert client.get("status") == "ready", client
        batch = {"data": [{"model_input": {"text": "the quick brown fox"}}], "loss_fn": "cross_entropy"}  # fmt: skip
        losses = []
        for _ in range(3):
            losses.append(org.call(client["id"], "forward_backward", batch)["loss"])
            org.call(client["id"], "optim_step", {"adam_params": {"learning_rate": 0.01}})
        assert losses[-1] < losses[0], losses
    finally:
        org.delete_all()


def test_a_base_changed_after_create_fails_its_job_plainly(
    stack: StackProcess, tmp_path: Path
) -> None:
    """The job pins the base's files at create; the executor that claims it later holds
    other bytes under that name, and refuses the task saying so."""
    name, org = f"tiny-pinned-{secrets.token_hex(2)}", f"pins-{secrets.token_hex(3)}"
    base = make_family_model(stack.home / "models" / name, "qwen2")
    member = httpx.Client(base_url=stack.url, headers=bearer(stack.create_key(org)), timeout=60)
    machine = f"pinned-{secrets.token_hex(3)}"
    body = {**job_body(name, "lora"), "resources": {"machines": [machine]}}
    created = member.post("/v1/train/jobs", json=body)
    assert created.status_code == 200, created.text
    assert created.json()["revision"] == pins.revision(base)
    make_family_model(base, "qwen2", seed=2)  # other weights under the same name
    key, work = stack.create_key(org, "executor"), tmp_path / "work"
    argv = ("--no-warm", "--work-dir", str(work))
    with org_executor(stack, key, machine, tmp_path / "executor.log", *argv):
        done = wait_for_job(member, created.json()["id"], lambda j: j["status"] in ENDED)
    assert (done["status"], done["failure_code"], done["failure_category"]) == (
        "failed",
        "base_changed",
        "input",
    )
    assert "pinned at create" in done["failure_message"]
    assert str(stack.home) not in done["failure_message"]
    # Nothing ran: the task was refused before its trainer started.
    assert not list(work.glob(f"{machine}/tsk_*/trainer.log"))
