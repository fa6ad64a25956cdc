"""The training-client engine on the fixture model, as a caller sees it: it learns over
forward_backward and optim_step, applies a replayed operation once, saves an adapter that
loads back into the same logits, decodes reproducibly, refuses bad input naming the field
(and changes nothing), and speaks its JSON-lines protocol as a subprocess."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from google.protobuf import json_format
from peft import PeftModel

from executor.engines.lora import Engine, LoadFailed
from executor.models import fixture
from trainyard.client.v1 import client_pb2

BASE = "fixture-tiny-llm"
ADAPTATION = {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]}
TEXT = "hello hello hello hello world"
BATCH: dict[str, Any] = {
    "data": [
        {"model_input": {"text": TEXT}},
        {
            "model_input": {"tokens": [fixture.BOS, 104, 105, 33]},
            "loss_fn_inputs": {
                "target_tokens": [104, 105, 33, fixture.EOS],
                "weights": [1, 1, 1, 0.5],
            },
        },
    ],
    "loss_fn": "cross_entropy",
}
FAST = {"adam_params": {"learning_rate": 1e-2}}


def engine(seed: int = 0) -> Engine:
    return Engine(BASE, ADAPTATION, seed=seed)


def ok(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["ok"], answer
    output: dict[str, Any] = answer["output"]
    return output


def trainable(e: Engine) -> list[torch.Tensor]:
    return [p.detach().clone() for p in e.trainable]


def grads(e: Engine) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.detach().clone() for p in e.trainable]


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
        for x, y in zip(a, b, strict=True)
    )


def train(e: Engine, rounds: int, start: int = 1) -> list[float]:
    losses = []
    for i in range(rounds):
        losses.append(ok(e.apply(start + 2 * i, "forward_backward", BATCH))["loss"])
        ok(e.apply(start + 2 * i + 1, "optim_step", FAST))
    return losses


def test_the_loss_of_a_fixed_batch_falls_over_twenty_steps() -> None:
    e = engine()
    losses = train(e, 20)
    assert losses[-1] < losses[0] - 0.5
    assert e.step == 20


def test_forward_backward_reports_a_logprob_per_target_and_the_weighted_mean() -> None:
    e = engine()
    out = ok(e.apply(1, "forward_backward", BATCH))
    first, second = (o["logprobs"] for o in out["loss_fn_outputs"])
    # Text alone is next-token prediction over bos + the text's bytes.
    assert len(first) == len(TEXT)
    assert len(second) == 4
    assert all(lp < 0 for lp in first + second)
    weights = [1.0] * len(TEXT) + [1, 1, 1, 0.5]
    total = -sum(w * lp for w, lp in zip(weights, first + second, strict=True))
    assert out["metrics"]["loss:sum"] == pytest.approx(total, rel=1e-5)
    assert out["loss"] == pytest.approx(total / sum(weights), rel=1e-5)
    assert out["metrics"]["tokens"] == len(TEXT) + 4


RL_DATUM: dict[str, Any] = {
    "model_input": {"tokens": [fixture.BOS, 104, 105, 33]},
    "loss_fn_inputs": {
        "target_tokens": [104, 105, 33, fixture.EOS],
        "logprobs": [-5.0, -6.5, -4.0, -7.0],
        "advantages": [1.0, -0.5, 2.0, 0.0],
    },
}


PPO_BAD_CLIP = {"loss_fn": "ppo", "loss_fn_config": {"clip_low_threshold": 7.5}, "data": [RL_DATUM]}


TOO_MANY_STOPS = {"prompt": {"text": "hi"}, "sampling_params": {"stop_tokens": list(range(17))}}


def rl_datum(**inputs: Any) -> dict[str, Any]:
    return {**RL_DATUM, "loss_fn_inputs": {**RL_DATUM["loss_fn_inputs"], **inputs}}


def test_a_forward_only_answers_as_forward_backward_and_keeps_no_gradient() -> None:
    e, f = engine(), engine()
    forward = ok(e.apply(1, "forward_backward", {**BATCH, "forward_only": True}))
    assert all(p.grad is None for p in e.trainable)
    both = ok(f.apply(1, "forward_backward", BATCH))
    assert forward["loss"] == pytest.approx(both["loss"], rel=1e-6)
    for a, b in zip(forward["loss_fn_outputs"], both["loss_fn_outputs"], strict=True):
        assert a["logprobs"] == pytest.approx(b["logprobs"], rel=1e-6)
        assert a["elementwise_loss"] == pytest.approx(b["elementwise_loss"], rel=1e-6)
    # Nothing accumulated: a step after it moves nothing but the optimizer's count.
    weights = trainable(e)
    ok(e.apply(2, "optim_step", FAST))
    assert same(trainable(e), weights)


def test_each_datum_answers_its_elementwise_loss_summing_to_the_loss_sum() -> None:
    out = ok(engine().apply(1, "forward_backward", BATCH))
    terms = [t for o in out["loss_fn_outputs"] for t in o["elementwise_loss"]]
    logprobs = [lp for o in out["loss_fn_outputs"] for lp in o["logprobs"]]
    weights = [1.0] * len(TEXT) + [1, 1, 1, 0.5]
    assert terms == pytest.approx([-w * lp for w, lp in zip(weights, logprobs, strict=True)])
    assert sum(terms) == pytest.approx(out["metrics"]["loss:sum"], rel=1e-5)


def test_importance_sampling_is_the_negative_sum_of_ratio_times_advantage() -> None:
    e = engine()
    out = ok(e.apply(1, "forward_backward", {"loss_fn": "importance_sampling", "data": [RL_DATUM]}))
    inputs = RL_DATUM["loss_fn_inputs"]
    logprobs = out["loss_fn_outputs"][0]["logprobs"]
    terms = [
        -math.exp(lp - q) * a
        for lp, q, a in zip(logprobs, inputs["logprobs"], inputs["advantages"], strict=True)
    ]
    assert out["loss_fn_outputs"][0]["elementwise_loss"] == pytest.approx(terms, rel=1e-5)
    assert out["loss"] == pytest.approx(sum(terms), rel=1e-5)
    assert out["metrics"]["loss:sum"] == pytest.approx(sum(terms), rel=1e-5)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in e.trainable)


@pytest.mark.parametrize(
    ("config", "low", "high"),
    [({}, 0.8, 1.2), ({"clip_low_threshold": 0.5, "clip_high_threshold": 3.0}, 0.5, 3.0)],
)
def test_ppo_clips_the_ratio_as_its_config_says(
    config: dict[str, float], low: float, high: float
) -> None:
    # Sampling logprobs far from the model's make the ratio leave [low, high] both ways.
    datum = rl_datum(logprobs=[-9.0, -1.0, -9.0, -1.0])
    body = {"loss_fn": "ppo", "loss_fn_config": config, "data": [datum]}
    out = ok(engine().apply(1, "forward_backward", body))
    inputs = datum["loss_fn_inputs"]
    logprobs = out["loss_fn_outputs"][0]["logprobs"]
    terms = []
    for lp, q, a in zip(logprobs, inputs["logprobs"], inputs["advantages"], strict=True):
        ratio = math.exp(lp - q)
        terms.append(-min(ratio * a, min(max(ratio, low), high) * a))
    assert out["loss_fn_outputs"][0]["elementwise_loss"] == pytest.approx(terms, rel=1e-5)
    assert out["loss"] == pytest.approx(sum(terms), rel=1e-5)


def test_a_client_resumed_from_a_saved_state_continues_as_if_uninterrupted(
    tmp_path: Path,
) -> None:
    uninterrupted = train(engine(), 5)
    first = engine()
    losses = train(first, 3)
    saved = ok(first.apply(7, "save_weights", {"name": "ckpt", "kind": "state"}, tmp_path / "s"))
    assert (saved["kind"], saved["optimizer"], saved["step"]) == ("state", True, 3)
    assert (tmp_path / "s" / "optimizer.safetensors").is_file()
    resumed = Engine(BASE, ADAPTATION, init_dir=tmp_path / "s", with_optimizer=True)
    assert resumed.step == 3
    assert losses + train(resumed, 2) == pytest.approx(uninterrupted, rel=1e-6)
    # The adapter alone starts from the weights, with a fresh optimizer: another path.
    fresh = Engine(BASE, ADAPTATION, init_dir=tmp_path / "s")
    assert fresh.step == 0
    again = train(fresh, 2)
    assert again[0] == pytest.approx(uninterrupted[3], rel=1e-6)
    assert again[1] != pytest.approx(uninterrupted[4], rel=1e-6)


def test_a_lora_save_holds_no_optimizer_state_and_a_restore_of_it_fails(tmp_path: Path) -> None:
    e = engine()
    train(e, 1)
    saved = ok(e.apply(3, "save_weights", {"name": "a"}, tmp_path / "a"))
    assert (saved["kind"], saved["optimizer"]) == ("lora", False)
    assert not (tmp_path / "a" / "optimizer.safetensors").exists()
    with pytest.raises(LoadFailed):
        Engine(BASE, ADAPTATION, init_dir=tmp_path / "a", with_optimizer=True)
    with pytest.raises(LoadFailed):  # another shape of adapter never half-loads
        Engine(BASE, {**ADAPTATION, "rank": 4}, init_dir=tmp_path / "a")


def test_a_sample_answers_prompt_logprobs_and_their_top_k() -> None:
    e = engine()
    train(e, 2)
    prompt = [fixture.BOS, 104, 105, 33]
    body = {
        "prompt": {"tokens": prompt},
        "prompt_logprobs": True,
        "topk_prompt_logprobs": 3,
        "sampling_params": {"max_tokens": 1, "seed": 1},
    }
    out = ok(e.apply(10, "sample", body))
    scored = ok(
        e.apply(
            11,
            "forward_backward",
            {
                "forward_only": True,
                "data": [{"model_input": {"tokens": prompt[:-1]}, "loss_fn_inputs": {"target_tokens": prompt[1:]}}],
            },
        )
    )  # fmt: skip
    assert out["prompt_logprobs"][0] == "NaN"
    expected = scored["loss_fn_outputs"][0]["logprobs"]
    assert out["prompt_logprobs"][1:] == pytest.approx(expected, rel=1e-5)
    top = out["topk_prompt_logprobs"]
    assert len(top) == len(prompt) and top[0] == {}
    for row, actual in zip(top[1:], expected, strict=True):
        assert len(row["token_ids"]) == len(row["logprobs"]) == 3
        assert row["logprobs"] == sorted(row["logprobs"], reverse=True)
        assert row["logprobs"][0] >= actual - 1e-6
    plain_body = {"prompt": {"tokens": prompt}, "sampling_params": {"max_tokens": 1, "seed": 1}}
    plain = ok(e.apply(12, "sample", plain_body))
    assert "prompt_logprobs" not in plain and plain["sequences"] == out["sequences"]
    parsed = json_format.Parse(json.dumps(out), client_pb2.SampleOutput())
    assert math.isnan(parsed.prompt_logprobs[0]) and len(parsed.topk_prompt_logprobs) == 4


def test_a_replayed_operation_is_answered_again_and_applied_once() -> None:
    once, replayed = engine(), engine()
    first = replayed.apply(1, "forward_backward", BATCH)
    weights, grad = trainable(replayed), grads(replayed)
    assert replayed.apply(1, "forward_backward", BATCH) == first
    assert same(trainable(replayed), weights)
    assert same(grads(replayed), grad)

    once.apply(1, "forward_backward", BATCH)
    assert ok(replayed.apply(2, "optim_step", FAST)) == ok(once.apply(2, "optim_step", FAST))
    assert same(trainable(replayed), trainable(once))
    # A step replayed is not stepped again.
    replayed.apply(2, "optim_step", FAST)
    assert replayed.step == 1
    assert same(trainable(replayed), trainable(once))


def test_a_seq_too_old_to_be_held_answers_conflict() -> None:
    e = engine()
    e.apply(5, "optim_step", {})
    answer = e.apply(3, "optim_step", {})
    assert (answer["ok"], answer["code"]) == (False, "CONFLICT")
    assert e.step == 1


def test_saved_weights_load_back_into_the_same_logits(tmp_path: Path) -> None:
    e = engine()
    train(e, 3)
    saved = ok(e.apply(10, "save_weights", {"name": "adapter-1"}, tmp_path / "a"))
    assert saved == {
        "name": "adapter-1",
        "step": 3,
        "dir": str(tmp_path / "a"),
        "kind": "lora",
        "optimizer": False,
    }
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["adapter_config.json", "adapter_model.safetensors", "trainyard.json"]
    meta = json.loads((tmp_path / "a" / "trainyard.json").read_text())
    assert (meta["base_model"], meta["step"], meta["seed"]) == (BASE, 3, 0)

    ok(e.apply(11, "save_weights", {"name": "adapter-1"}, tmp_path / "b"))
    for name in files:  # the same weights are the same bytes
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

    loaded = PeftModel.from_pretrained(fixture.build(), str(tmp_path / "a")).eval()
    ids = torch.tensor([[fixture.BOS, *TEXT.encode()]])
    with torch.no_grad():
        expected = e.model(input_ids=ids).logits
        got = loaded(input_ids=ids).logits
        untrained = fixture.build()(input_ids=ids).logits
    assert torch.allclose(got, expected, atol=1e-5)
    assert not torch.allclose(untrained, expected, atol=1e-3)


def sample(e: Engine, seq: int, **params: Any) -> dict[str, Any]:
    body = {"prompt": {"text": "hello"}, "num_samples": 2, "sampling_params": params}
    return ok(e.apply(seq, "sample", body))


def test_sampling_repeats_with_its_seed_and_leaves_gradients_alone() -> None:
    e = engine()
    train(e, 5)
    ok(e.apply(20, "forward_backward", BATCH))
    grad = grads(e)

    a = sample(e, 21, seed=7, max_tokens=24)
    b = sample(e, 22, seed=7, max_tokens=24)
    assert a == b
    assert [len(s["tokens"]) for s in a["sequences"]] == [24, 24]
    assert all(s["stop_reason"] == "length" and s["text"] for s in a["sequences"])
    assert all(len(s["logprobs"]) == len(s["tokens"]) for s in a["sequences"])
    assert sample(e, 23, seed=8, max_tokens=24) != a

    greedy = sample(e, 24, temperature=0, max_tokens=12, seed=1)
    assert greedy == sample(e, 25, temperature=0, max_tokens=12, seed=2)
    first, second = greedy["sequences"]
    # A batch's rows agree token for token; their logprobs only to float rounding, as each
    # row's sums may run in another order.
    assert first["tokens"] == second["tokens"] and first["text"] == second["text"]
    assert first["logprobs"] == pytest.approx(second["logprobs"], rel=1e-5)
    assert first["text"] == bytes(first["tokens"]).decode(errors="replace")
    assert same(grads(e), grad)


def test_a_stop_string_ends_the_sequence_before_it() -> None:
    e = engine()
    train(e, 5)
    full = sample(e, 20, seed=3, max_tokens=32)["sequences"][0]["text"]
    stop = next(c for c in full[1:] if c.isascii() and c != full[0])
    cut = sample(e, 21, seed=3, max_tokens=32, stop=[stop])["sequences"][0]
    assert cut["stop_reason"] == "stop"
    assert cut["text"] == full[: full.index(stop)]
    assert bytes(cut["tokens"]).decode(errors="replace") == cut["text"]


def test_a_stop_token_ends_the_sequence_at_it_included() -> None:
    e = engine()
    train(e, 5)
    full = sample(e, 20, seed=3, max_tokens=16)["sequences"][0]
    stop = full["tokens"][3]
    cut = sample(e, 21, seed=3, max_tokens=16, stop_tokens=[stop])["sequences"][0]
    end = full["tokens"].index(stop) + 1
    assert cut["stop_reason"] == "stop"
    assert cut["tokens"] == full["tokens"][:end]
    assert cut["logprobs"] == pytest.approx(full["logprobs"][:end], rel=1e-6)


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("forward_backward", {"data": [{"model_input": {"tokens": [1, 300]}}]}, "data[0].model_input.tokens"),
        (
            "forward_backward",
            {"data": [BATCH["data"][0], {"model_input": {"tokens": [1, 2]}, "loss_fn_inputs": {"target_tokens": [3]}}]},
            "data[1].loss_fn_inputs.target_tokens",
        ),
        ("forward_backward", {**BATCH, "loss_fn": "ppo-9931"}, "loss_fn"),
        ("forward_backward", {**BATCH, "forward_only": "17"}, "forward_only"),
        (
            "forward_backward",
            {"loss_fn": "importance_sampling", "data": [rl_datum(advantages=[1.0])]},
            "data[0].loss_fn_inputs.advantages",
        ),
        (
            "forward_backward",
            {"loss_fn": "ppo", "data": [rl_datum(logprobs=[-1, 7.5, -1, -1])]},
            "data[0].loss_fn_inputs.logprobs",
        ),
        ("forward_backward", PPO_BAD_CLIP, "loss_fn_config"),
        ("forward_backward", {**BATCH, "loss_fn_config": {"clip_low_threshold": 0.5}}, "loss_fn_config"),
        ("forward_backward", {"data": []}, "data"),
        ("forward_backward", {"data": [{"model_input": {"tokens": [1], "text": "x"}}]}, "data[0].model_input"),
        (
            "forward_backward",
            {"data": [{"model_input": {"tokens": [1]}, "loss_fn_inputs": {"target_tokens": [2], "weights": [-4.5]}}]},
            "data[0].loss_fn_inputs.weights",
        ),
        ("optim_step", {"adam_params": {"learning_rate": 7.5}}, "adam_params.learning_rate"),
        ("optim_step", {"adam_params": {"beta2": 1.0}}, "adam_params.beta2"),
        ("sample", {"prompt": {"text": "hi"}, "num_samples": 17}, "num_samples"),
        ("sample", {"prompt": {"text": "hi"}, "sampling_params": {"top_p": 0}}, "sampling_params.top_p"),
        ("sample", {"prompt": {"text": "hi"}, "sampling_params": {"max_tokens": 4096}}, "sampling_params.max_tokens"),
        ("save_weights", {"name": "../etc/passwd"}, "name"),
        ("save_weights", {"name": "a", "kind": "teleport"}, "kind"),
        ("sample", {"prompt": {"text": "hi"}, "topk_prompt_logprobs": 4096}, "topk_prompt_logprobs"),
        ("sample", TOO_MANY_STOPS, "sampling_params.stop_tokens"),
        ("teleport", {}, "kind"),
    ],
)  # fmt: skip
def test_a_bad_input_is_refused_naming_its_field_and_changes_nothing(
    tmp_path: Path, kind: str, body: dict[str, Any], field: str
) -> None:
    e = engine()
    ok(e.apply(1, "forward_backward", BATCH))
    weights, grad = trainable(e), grads(e)
    answer = e.apply(2, kind, body, tmp_path / "w")
    assert (answer["ok"], answer["code"], answer["field"]) == (False, "INVALID_REQUEST", field)
    for value in ("300", "ppo-9931", "7.5", "4096", "passwd", "teleport", "-4.5", "17"):
        assert value not in answer["message"]
    assert same(trainable(e), weights)
    assert same(grads(e), grad)
    assert e.step == 0
    assert not (tmp_path / "w").exists()


def test_camel_case_proto_json_is_read_as_snake_case() -> None:
    e = engine()
    body = {
        "data": [
            {"modelInput": {"tokens": [1, 2]}, "lossFnInputs": {"targetTokens": [2, 3]}},
        ],
        "lossFn": "cross_entropy",
    }
    assert len(ok(e.apply(1, "forward_backward", body))["loss_fn_outputs"][0]["logprobs"]) == 2
    out = ok(
        e.apply(
            2,
            "sample",
            {"prompt": {"tokens": [1]}, "samplingParams": {"maxTokens": 3, "seed": "5"}},
        )
    )
    assert len(out["sequences"][0]["tokens"]) == 3


def test_outputs_are_the_proto_json_of_their_messages() -> None:
    e = engine()
    outputs = [
        (client_pb2.ForwardBackwardOutput, ok(e.apply(1, "forward_backward", BATCH))),
        (client_pb2.OptimStepOutput, ok(e.apply(2, "optim_step", FAST))),
        (client_pb2.SampleOutput, sample(e, 3, seed=1, max_tokens=4)),
        (
            client_pb2.ForwardBackwardOutput,
            ok(e.apply(4, "forward_backward", {"loss_fn": "ppo", "data": [RL_DATUM]})),
        ),
    ]
    for message, output in outputs:
        # The service parses answers strictly: an unknown field would be refused.
        parsed = json_format.Parse(json.dumps(output), message())
        assert json_format.MessageToDict(parsed, preserving_proto_field_name=True) == output


def test_the_engine_speaks_json_lines_as_a_subprocess(tmp_path: Path) -> None:
    spec = {
        "client": "cli_0123456789abcdef",
        "base_model": BASE,
        "adaptation": {"mode": "lora", **ADAPTATION},
        "seed": 0,
        "work_dir": str(tmp_path),
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    with (
        open(tmp_path / "engine.log", "w") as log,
        subprocess.Popen(
            [sys.executable, "-m", "executor.engines", str(tmp_path / "spec.json")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        ) as proc,
    ):  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["ready"] is True
        assert ready["vocab_size"] == 259
        assert ready["trainable"] > 0
        ops = [
            {"seq": 1, "kind": "forward_backward", "input": BATCH},
            {"seq": 2, "kind": "optim_step", "input": FAST},
            {"seq": 3, "kind": "save_weights", "input": {"name": "a"}},
            {"seq": 2, "kind": "optim_step", "input": FAST},
        ]
        for op in ops:
            proc.stdin.write(json.dumps(op) + "\n")
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in ops]
        assert [(a["seq"], a["ok"]) for a in answers] == [
            (1, True),
            (2, True),
            (3, True),
            (2, True),
        ]
        assert answers[0]["output"]["loss"] > 0
        assert answers[1]["output"]["step"] == 1
        assert answers[3] == answers[1]  # a replay is answered from the cache
        assert answers[2]["output"]["dir"] == str(tmp_path / "weights-3")
        assert (tmp_path / "weights-3" / "adapter_model.safetensors").is_file()
        assert all(a["seconds"] >= 0 for a in answers)
        proc.stdin.close()  # the executor is gone: the engine goes too
        assert proc.wait(timeout=60) == 0


def test_an_unknown_base_fails_the_load_with_its_code(tmp_path: Path) -> None:
    spec = {
        "client": "cli_0",
        "base_model": "no-such-base",
        "adaptation": {},
        "work_dir": str(tmp_path),
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "TRAINYARD_MODELS_DIR": str(tmp_path / "models")}
    done = subprocess.run(
        [sys.executable, "-m", "executor.engines", str(tmp_path / "spec.json")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"failed": "base_not_found"}


def test_a_call_past_its_deadline_is_refused_unrun_and_the_next_one_runs() -> None:
    e = engine()
    late = e.apply(1, "forward_backward", {**BATCH, "deadline": time.time() - 1})
    assert (late["ok"], late["code"], late["seconds"]) == (False, "DEADLINE_EXCEEDED", 0.0)
    assert all(g is None for g in grads(e))
    ok(e.apply(2, "forward_backward", {**BATCH, "deadline": time.time() + 60}))
    assert all(g is not None for g in grads(e))
