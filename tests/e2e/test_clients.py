"""Interactive training clients over REST through the gateway, on a stack started as the
README says (its local executor serves two clients): an operator creates a client in an
org, the org's member drives it step by step in Tinker's shapes, and what a user sees
holds: the loss falls, a replayed call runs once, two clients stay apart, the limits
answer `503 ENGINE_FULL`, a saved adapter is an artifact of the org, a call not ended in
time answers its future, and a client whose executor dies reads `lost`."""

from __future__ import annotations

import json
import math
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

from executor.models import fixture
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
    assert read["cost_micro_cents"] == -sum(e["micro_cents"] for e in charged)
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
    assert r.status_code == 409 and reason(r) == "idempotency_key_reused"
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
    # An org's member creates its own clients (the deployment's default); a machine's
    # key may not.
    machine = bearer(stack.create_key(org.name, "executor"))
    r = httpx.post(f"{stack.url}/v1/train/clients", json={"base_model": BASE}, headers=machine)
    assert r.status_code == 403 and reason(r) == "permission_denied"
    r = org.member.post("/v1/train/clients", json={"base_model": "fixture-tiny-decider"})
    assert r.status_code == 400 and reason(r) == "unsupported_base"
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
    assert r.status_code == 400 and reason(r) == "unsupported_protect"
    org.create()
    org.create()
    r = org.operator.post("/v1/train/clients", json={"base_model": BASE})
    assert r.status_code == 503 and reason(r) == "engine_full"
    # Another org's client answers as an unknown one, to its calls too.
    cid = org.member.get("/v1/train/clients").json()["clients"][0]["id"]
    stranger = Org(stack)
    assert stranger.member.get(f"/v1/train/clients/{cid}").status_code == 404
    r = stranger.member.post(f"/v1/train/clients/{cid}/optim_step", json={})
    assert r.status_code == 404 and reason(r) == "not_found"
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
    assert r.status_code == 400 and reason(r) == "invalid_request"
    assert org.member.get(f"/v1/train/clients/{cid}").json().get("loss_history", []) == []
    # Deleted, it frees its slot at once.
    deleted = org.member.delete(f"/v1/train/clients/{cid}").json()
    assert deleted["status"] == "deleted"
    r = org.member.post(f"/v1/train/clients/{cid}/optim_step", json={})
    assert r.status_code == 409 and reason(r) == "client_gone"
    org.create()


def test_a_call_past_its_wait_answers_its_future_and_saved_weights_reload_to_its_logits(
    stack: StackProcess, org: Org, tmp_path: Path
) -> None:
    cid = org.create()["id"]
    # The second call, sent first, runs only after the first: it cannot have ended.
    r = org.member.post(
        f"/v1/train/clients/{cid}/forward_backward", json={"seq": 2, "wait": 0, **batch()}
    )
    assert r.status_code == 202, r.text
    future = r.json()
    assert future["status"] == "queued" and "forward_backward" not in future
    org.call(cid, "forward_backward", {"seq": 1, **batch()})
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
    # A member creates the org's own (the deployment's default); a machine's key may not.
    own = json.loads(stack.cli("clients", "create", key=member).stdout)
    assert own["status"] == "ready"
    gone = stack.cli("clients", "delete", own["id"], key=member).stdout
    assert gone.split() == [own["id"], "deleted"]
    machine = stack.create_key(org.name, "executor")
    refused = stack.cli("clients", "create", key=machine, check=False)
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
    assert r.status_code == 409 and reason(r) == "client_gone"
    assert not alive(pid)


def rounds(org: Org, cid: str, n: int) -> list[float]:
    losses = []
    for _ in range(n):
        losses.append(org.call(cid, "forward_backward", batch())["loss"])
        org.call(cid, "optim_step", {"adam_params": {"learning_rate": 0.004}})
    return losses


def test_a_client_from_a_saved_state_with_its_optimizer_continues_as_if_uninterrupted(
    stack: StackProcess, org: Org
) -> None:
    first = org.create(lora_config={"rank": 4, "alpha": 8, "seed": 5})
    cid = first["id"]
    before = rounds(org, cid, 3)
    state = org.call(cid, "save_weights", {"name": "ckpt", "kind": "state"})
    assert (state["kind"], state["optimizer"], state["step"]) == ("state", True, 3)
    adapter = org.call(cid, "save_weights", {"name": "weights"})
    assert adapter["kind"] == "lora" and not adapter.get("optimizer")
    # Both are lora objects of the org, as any adapter is.
    stored = org.member.get(f"/v1/train/artifacts/{state['sha256']}").json()
    assert stored["kind"] == "lora" and stored["meta"]["client"] == cid
    uninterrupted = before + rounds(org, cid, 2)
    org.member.delete(f"/v1/train/clients/{cid}")

    # The shape is the saved one's, filled in; a shape of its own is refused by name.
    r = org.operator.post(
        "/v1/train/clients",
        json={"base_model": BASE, "from": state["sha256"], "lora_config": {"rank": 8}},
    )
    assert r.status_code == 400 and reason(r) == "incompatible_adapters"
    assert r.json()["fields"] == ["lora_config.rank"]
    r = org.operator.post(
        "/v1/train/clients",
        json={"base_model": BASE, "from": adapter["sha256"], "with_optimizer": True},
    )
    assert r.status_code == 400 and r.json()["fields"] == ["with_optimizer"]
    stranger = Org(stack)
    r = stranger.operator.post(
        "/v1/train/clients", json={"base_model": BASE, "from": state["sha256"]}
    )
    assert r.status_code == 400 and r.json()["fields"] == ["from"]
    assert state["sha256"] not in r.text
    listed = org.member.get("/v1/train/clients", params={"status": "ready"}).json()
    assert listed.get("clients", []) == []

    resumed = org.create(**{"from": state["sha256"], "with_optimizer": True})
    assert resumed["from"] == state["sha256"] and resumed["with_optimizer"] is True
    assert (resumed["adaptation"]["rank"], resumed["adaptation"]["alpha"]) == (4, 8)
    after = rounds(org, resumed["id"], 2)
    assert before + after == pytest.approx(uninterrupted, rel=1e-5)
    assert org.member.get(f"/v1/train/clients/{resumed['id']}").json()["step"] == 5
    # From the adapter alone, the optimizer starts afresh: the first loss is the same, the
    # second is not.
    org.member.delete(f"/v1/train/clients/{resumed['id']}")
    fresh = org.create(**{"from": adapter["sha256"]})
    assert fresh["from"] == adapter["sha256"] and not fresh.get("with_optimizer")
    again = rounds(org, fresh["id"], 2)
    assert again[0] == pytest.approx(uninterrupted[3], rel=1e-5)
    assert again[1] != pytest.approx(uninterrupted[4], rel=1e-5)


def test_forward_rl_losses_and_prompt_logprobs_through_the_sdk(
    stack: StackProcess, org: Org
) -> None:
    from trainyard.client.v1 import client_pb2

    operator = stack.create_key("ops", "operator")
    member = org.member.headers["authorization"].removeprefix("Bearer ")
    tokens, targets = [BOS, *TEXT.encode()[:12]], [*TEXT.encode()[:12], EOS]
    with Client(stack.url, operator) as ops, Client(stack.url, member) as sdk:
        cid = ops.create_training_client(BASE, seed=2, org=org.name).id
        with sdk.training_client(cid) as tc:
            datum = {
                "model_input": {"tokens": tokens},
                "loss_fn_inputs": {"target_tokens": targets},
            }
            forward = tc.forward([datum]).result()
            assert tc.forward([datum]).result().loss == forward.loss
            # A forward keeps no gradient: a step after it moves nothing.
            tc.optim_step({"learning_rate": 0.1}).result()
            assert tc.forward([datum]).result().loss == pytest.approx(forward.loss, rel=1e-6)
            logprobs = list(forward.loss_fn_outputs[0].logprobs)
            sampled = [lp - 0.25 for lp in logprobs]
            advantages = [1.0 if i % 2 else -0.5 for i in range(len(tokens))]
            rl = client_pb2.Datum(
                model_input=client_pb2.ModelInput(tokens=tokens),
                loss_fn_inputs=client_pb2.LossFnInputs(
                    target_tokens=targets, logprobs=sampled, advantages=advantages
                ),
            )
            expected = -sum(
                math.exp(lp - q) * a for lp, q, a in zip(logprobs, sampled, advantages, strict=True)
            )
            out = tc.forward_backward([rl], "importance_sampling").result()
            assert out.loss == pytest.approx(expected, rel=1e-4)
            assert sum(out.loss_fn_outputs[0].elementwise_loss) == pytest.approx(expected, rel=1e-4)
            # exp(0.25) is past 1.2: PPO clips the ratio where the advantage is positive.
            clipped = -sum(
                min(math.exp(lp - q) * a, min(max(math.exp(lp - q), 0.8), 1.2) * a)
                for lp, q, a in zip(logprobs, sampled, advantages, strict=True)
            )
            ppo = tc.forward_backward([rl], "ppo").result()
            assert ppo.loss == pytest.approx(clipped, rel=1e-4) and ppo.loss != pytest.approx(
                expected, rel=1e-3
            )
            tc.optim_step({"learning_rate": 0.01}).result()
            scored = tc.forward([datum]).result().loss_fn_outputs[0].logprobs
            answer = tc.sample(
                [*tokens, EOS],
                sampling_params={"max_tokens": 1, "seed": 1},
                prompt_logprobs=True,
                topk_prompt_logprobs=2,
            ).result()
            assert math.isnan(answer.prompt_logprobs[0])
            assert list(answer.prompt_logprobs[1:]) == pytest.approx(list(scored), abs=1e-4)
            assert len(answer.topk_prompt_logprobs) == len(tokens) + 1
            assert [len(t.token_ids) for t in answer.topk_prompt_logprobs] == [0] + [2] * len(
                tokens
            )
            # Over REST the first prompt logprob is NaN as proto JSON writes it.
            r = org.member.post(
                f"/v1/train/clients/{cid}/sample",
                json={
                    "prompt": {"tokens": tokens},
                    "prompt_logprobs": True,
                    "sampling_params": {"max_tokens": 1},
                },
            )
            assert r.status_code == 200, r.text
            assert r.json()["sample"]["prompt_logprobs"][0] == "NaN"
