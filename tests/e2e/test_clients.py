"""Interactive training clients over REST through the gateway, on a stack started as the
README says (its local executor serves two clients): an operator creates a client in an
org, the org's member drives it step by step in Tinker's shapes, and what a user sees
holds: the loss falls, a replayed call runs once, two clients stay apart, the limits
answer `503 ENGINE_FULL`, a saved adapter is an artifact of the org, a call not ended in
time answers its future, and a client whose executor dies reads `lost`."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from peft import PeftModel

from executor import fixture
from tests.e2e.test_metrics import metric
from tests.support import StackProcess, alive, bearer, reason
from trainyard import packing
from trainyard.sdk import Client

ROOT = Path(__file__).resolve().parents[2]
BASE = "fixture-tiny-llm"
BOS, EOS = fixture.BOS, fixture.EOS
TEXT = "the quick brown fox jumps over the lazy dog. "


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    """A stack of the module's own: its two client slots and its executor are this
    module's to fill and to kill."""
    running = StackProcess(tmp_path_factory.mktemp("clients") / "home").start()
    try:
        yield running
    finally:
        running.stop()


class Org:
    """An org with a member who drives its clients and an operator who creates them."""

    def __init__(self, stack: StackProcess) -> None:
        self.name = f"org-{secrets.token_hex(4)}"
        self.member = httpx.Client(
            base_url=stack.url, headers=bearer(stack.create_key(self.name)), timeout=150
        )
        self.operator = httpx.Client(
            base_url=stack.url,
            headers={**bearer(stack.create_key("ops", "operator")), "x-org-id": self.name},
            timeout=150,
        )

    def create(self, **body: Any) -> dict[str, Any]:
        r = self.operator.post("/v1/train/clients", json={"base_model": BASE, **body})
        assert r.status_code == 200, r.text
        client = r.json()
        assert client["status"] == "ready", client
        return client

    def call(self, client_id: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.member.post(f"/v1/train/clients/{client_id}/{kind}", json=body)
        assert r.status_code == 200, r.text
        future = r.json()
        assert future["status"] == "done", future
        return future[kind]  # type: ignore[no-any-return]

    def delete_all(self) -> None:
        for client in self.member.get("/v1/train/clients").json().get("clients", []):
            self.member.delete(f"/v1/train/clients/{client['id']}")


@pytest.fixture
def org(stack: StackProcess) -> Iterator[Org]:
    made = Org(stack)
    try:
        yield made
    finally:
        made.delete_all()


def batch() -> dict[str, Any]:
    return {"data": [{"model_input": {"text": TEXT}}], "loss_fn": "cross_entropy"}


def test_a_clients_loss_falls_over_twenty_rounds_and_its_history_and_charges_show(
    stack: StackProcess, org: Org
) -> None:
    done_before = metric(
        stack,
        "claims",
        "trainyard_client_operations_total",
        kind="forward_backward",
        outcome="done",
    )
    client = org.create(lora_config={"rank": 8, "seed": 1})
    cid = client["id"]
    before = org.call(
        cid,
        "sample",
        {"prompt": {"text": "the "}, "sampling_params": {"max_tokens": 8, "temperature": 0}},
    )
    losses = []
    for _ in range(20):
        losses.append(org.call(cid, "forward_backward", batch())["loss"])
        step = org.call(cid, "optim_step", {"adam_params": {"learning_rate": 0.004}})
    assert step["step"] == 20
    assert losses[-1] < losses[0] * 0.85, losses
    after = org.call(
        cid,
        "sample",
        {"prompt": {"text": "the "}, "sampling_params": {"max_tokens": 8, "temperature": 0}},
    )
    assert len(after["sequences"][0]["tokens"]) == 8 and "text" in after["sequences"][0]
    assert before["sequences"][0]["tokens"] != after["sequences"][0]["tokens"]

    read = org.member.get(f"/v1/train/clients/{cid}").json()
    assert read["step"] == 20 and read["seq"] == 42
    assert [p["loss"] for p in read["loss_history"]] == pytest.approx(losses)
    # The local executor is the platform's: each call is charged once, by its engine-seconds.
    entries = org.member.get("/v1/train/ledger", params={"page_size": 100}).json()["entries"]
    charged = [e for e in entries if e["name"].startswith(f"client/{cid}/")]
    assert charged and len({e["name"] for e in charged}) == len(charged)
    assert int(read["cost_micro_cents"]) == -sum(int(e["micro_cents"]) for e in charged)
    # The claims process counts the calls its engines answered.
    done = metric(
        stack,
        "claims",
        "trainyard_client_operations_total",
        kind="forward_backward",
        outcome="done",
    )
    assert done - done_before == 20
    assert metric(stack, "claims", "trainyard_client_engine_seconds_total") > 0


def test_a_replayed_call_answers_the_first_and_runs_once_and_clients_stay_apart(
    org: Org,
) -> None:
    a = org.create(lora_config={"seed": 7})["id"]
    b = org.create(lora_config={"seed": 7})["id"]
    first = org.member.post(
        f"/v1/train/clients/{a}/forward_backward", json={"seq": 1, **batch()}
    ).json()
    again = org.member.post(
        f"/v1/train/clients/{a}/forward_backward", json={"seq": 1, **batch()}
    ).json()
    assert again["id"] == first["id"] and again["forward_backward"] == first["forward_backward"]
    other = {"seq": 1, "data": [{"model_input": {"text": "another batch"}}]}
    r = org.member.post(f"/v1/train/clients/{a}/forward_backward", json=other)
    assert r.status_code == 409 and reason(r) == "IDEMPOTENCY_KEY_REUSED"
    org.member.post(
        f"/v1/train/clients/{a}/optim_step", json={"seq": 2, "adam_params": {"learning_rate": 0.01}}
    )
    # B, with the same seed, takes one forward_backward and one step: the same weights as
    # A's only if A's replay did not add its gradient twice.
    org.call(b, "forward_backward", {"seq": 1, **batch()})
    org.call(b, "optim_step", {"seq": 2, "adam_params": {"learning_rate": 0.01}})
    la = org.call(a, "forward_backward", {"seq": 3, **batch()})
    lb = org.call(b, "forward_backward", {"seq": 3, **batch()})
    assert la["loss"] == pytest.approx(lb["loss"], rel=1e-5)
    assert la["loss"] < first["forward_backward"]["loss"]
    # Interleaved calls stay apart: A's steps leave B's weights alone.
    for seq in range(4, 10, 2):
        org.call(a, "optim_step", {"seq": seq, "adam_params": {"learning_rate": 0.01}})
        org.call(a, "forward_backward", {"seq": seq + 1, **batch()})
    lb_again = org.call(b, "forward_backward", {"seq": 4, **batch()})
    assert lb_again["loss"] == pytest.approx(lb["loss"], rel=1e-5)


def test_the_limits_the_roles_and_the_bases_are_answered_by_name(
    stack: StackProcess, org: Org
) -> None:
    r = org.member.post("/v1/train/clients", json={"base_model": BASE})
    assert r.status_code == 403 and reason(r) == "PERMISSION_DENIED"
    r = org.operator.post("/v1/train/clients", json={"base_model": "fixture-tiny-decider"})
    assert r.status_code == 400 and reason(r) == "UNSUPPORTED_BASE"
    assert r.json()["supported"] == [BASE]
    # The models list says which bases a client may load, from the check that refused it.
    models = {m["name"]: m for m in org.member.get("/v1/train/models").json()["models"]}
    assert models[BASE]["support"]["nouns"] == ["job", "client"]
    assert models["fixture-tiny-decider"]["support"]["nouns"] == ["job"]
    r = org.operator.post("/v1/train/clients", json={"base_model": BASE, "colour": 1})
    assert r.status_code == 400 and r.json()["fields"] == ["colour"]
    r = org.operator.post(
        "/v1/train/clients", json={"base_model": BASE, "protect": {"suites": ["x"]}}
    )
    assert r.status_code == 400 and reason(r) == "UNSUPPORTED_PROTECT"
    org.create()
    org.create()
    r = org.operator.post("/v1/train/clients", json={"base_model": BASE})
    assert r.status_code == 503 and reason(r) == "ENGINE_FULL"
    # Another org's client answers as an unknown one, to its calls too.
    cid = org.member.get("/v1/train/clients").json()["clients"][0]["id"]
    stranger = Org(stack)
    assert stranger.member.get(f"/v1/train/clients/{cid}").status_code == 404
    r = stranger.member.post(f"/v1/train/clients/{cid}/optim_step", json={})
    assert r.status_code == 404 and reason(r) == "NOT_FOUND"
    # A bad input is refused by field and changes nothing.
    bad = {"data": [{"model_input": {"tokens": [1, 2]}, "loss_fn_inputs": {"target_tokens": [1]}}]}
    r = org.member.post(f"/v1/train/clients/{cid}/forward_backward", json=bad)
    assert r.status_code == 400 and r.json()["fields"] == ["data[0].loss_fn_inputs.target_tokens"]
    r = org.member.post(
        f"/v1/train/clients/{cid}/forward_backward",
        json={
            "data": [{"model_input": {"tokens": [9999]}, "loss_fn_inputs": {"target_tokens": [1]}}]
        },
    )
    assert r.status_code == 400 and reason(r) == "VALIDATION_ERROR"
    assert org.member.get(f"/v1/train/clients/{cid}").json().get("loss_history", []) == []
    # Deleted, it frees its slot at once.
    deleted = org.member.delete(f"/v1/train/clients/{cid}").json()
    assert deleted["status"] == "deleted"
    r = org.member.post(f"/v1/train/clients/{cid}/optim_step", json={})
    assert r.status_code == 409 and reason(r) == "CLIENT_GONE"
    org.create()


def test_a_call_past_its_wait_answers_its_future_and_saved_weights_reload_to_its_logits(
    stack: StackProcess, org: Org, tmp_path: Path
) -> None:
    cid = org.create()["id"]
    r = org.member.post(f"/v1/train/clients/{cid}/forward_backward", json={"wait": 0, **batch()})
    assert r.status_code in (200, 202), r.text
    future = r.json()
    if r.status_code == 202:
        assert future["status"] in ("queued", "running") and "forward_backward" not in future
    done = org.member.get(f"/v1/train/futures/{future['id']}", params={"wait": 60}).json()
    assert done["status"] == "done" and done["forward_backward"]["loss"] > 0
    org.call(cid, "optim_step", {})
    saved = org.call(cid, "save_weights", {"name": "my-adapter"})
    assert saved["kind"] == "lora" and saved["step"] == 1
    artifact = org.member.get(f"/v1/train/artifacts/{saved['sha256']}").json()
    assert artifact["sha256"] == saved["sha256"] and artifact["kind"] == "lora"
    assert artifact["meta"]["client"] == cid and artifact["meta"]["step"] == "1"
    assert org.member.get(f"/v1/train/futures/{future['id']}x").status_code == 404
    # Downloaded and loaded the way peft loads an adapter, it answers the client's logits.
    tokens, targets = [BOS, *TEXT.encode()[:20]], [*TEXT.encode()[:20], EOS]
    datum = {"model_input": {"tokens": tokens}, "loss_fn_inputs": {"target_tokens": targets}}
    served = org.call(cid, "forward_backward", {"data": [datum]})["loss_fn_outputs"][0]
    key = org.member.headers["authorization"].removeprefix("Bearer ")
    with Client(stack.url, key) as sdk:
        packed = sdk.download(saved["sha256"], tmp_path / "adapter.tar")
    with packed.open("rb") as fh:
        packing.unpack(fh, tmp_path / "adapter")
    model = PeftModel.from_pretrained(fixture.build(), str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0]
    logprobs = torch.log_softmax(logits, -1)[range(len(targets)), targets]
    assert logprobs.tolist() == pytest.approx(served["logprobs"], abs=1e-4)


def test_the_cli_creates_lists_shows_and_deletes_clients(stack: StackProcess, org: Org) -> None:
    operator = stack.create_key("ops", "operator")
    made = stack.cli("clients", "create", "--org", org.name, "--seed", "3", key=operator)
    client = json.loads(made.stdout)
    assert client["status"] == "ready" and client["adaptation"]["rank"] == 8
    org.call(client["id"], "forward_backward", batch())
    member = org.member.headers["authorization"].removeprefix("Bearer ")
    [line] = stack.cli("clients", "list", key=member).stdout.splitlines()
    assert line.startswith(client["id"]) and " ready " in line and "step 0" in line
    shown = json.loads(stack.cli("clients", "get", client["id"], key=member).stdout)
    assert len(shown["loss_history"]) == 1
    gone = stack.cli("clients", "delete", client["id"], key=member).stdout
    assert gone.split() == [client["id"], "deleted"]
    refused = stack.cli("clients", "create", "--org", org.name, key=member, check=False)
    assert refused.returncode == 1 and "PERMISSION_DENIED" in refused.stderr


def test_the_example_fine_tunes_through_a_client_and_its_loss_falls(stack: StackProcess) -> None:
    org = f"org-{secrets.token_hex(4)}"
    env = {
        **stack.env,
        "TRAINYARD_URL": stack.url,
        "TRAINYARD_API_KEY": stack.create_key("ops", "operator"),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_client.py"), "--org", org],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("losses: ")]
    losses = json.loads(line.removeprefix("losses: "))
    assert len(losses) == 30 and losses[-1] < losses[0] * 0.85, losses


def test_a_client_whose_executor_is_killed_reads_lost(stack: StackProcess, org: Org) -> None:
    cid = org.create()["id"]
    org.call(cid, "forward_backward", batch())
    pid = stack.info()["pids"]["executor"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        read = org.member.get(f"/v1/train/clients/{cid}").json()
        if read["status"] != "ready":
            break
        time.sleep(0.2)
    assert read["status"] == "lost" and read["reason"] == "executor_lost", read
    r = org.member.post(f"/v1/train/clients/{cid}/optim_step", json={})
    assert r.status_code == 409 and reason(r) == "CLIENT_GONE"
    assert not alive(pid)
