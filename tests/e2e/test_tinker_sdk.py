"""The official `tinker` SDK (0.38.0), unchanged, against a stack started as the README
says: pointed at the gateway with `TINKER_BASE_URL` and a `tml-` key from
`trainyard admin create-key --tinker`, it trains a LoRA client whose loss falls, loads its
tokenizer with no hub access, pipelines its calls, saves weights for a sampler and samples
them, lists its runs and checkpoints; a wrong key is refused at once with a message that
says what to do; another org's run answers as an unknown one; an executor killed under a
call raises `RequestFailedError` rather than hanging. What reads stored rows (runs and
checkpoints, saved state) runs on SQLite and PostgreSQL; the rest, which only the wire and
the engine answer (the wire holds no database), and the example's loop, whose rows those
tests read already, on SQLite."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tinker
from tinker import types

from bench.stack import postgres_schema
from tests.conftest import PG_URL, database_params
from tests.support import StackProcess, bearer

ROOT = Path(__file__).resolve().parents[2]
BASE = "fixture-tiny-llm"
# The fixture's vocabulary is bytes: a sentence's token ids are its UTF-8 bytes.
TEXT = "the quick brown fox jumps over the lazy dog. "


@pytest.fixture(scope="module", params=database_params())
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackProcess]:
    """A stack of the module's own (its members create their own clients, as by default):
    its two client slots and its executor are this module's to fill and to kill."""
    with contextlib.ExitStack() as scope:
        env: dict[str, str] = {}
        if request.param == "postgresql":
            env["TRAINYARD_DATABASE_URL"] = scope.enter_context(postgres_schema(PG_URL))
        home = tmp_path_factory.mktemp(f"tinker-{request.param}") / "home"
        running = StackProcess(home, env=env).start()
        scope.callback(running.stop)
        yield running


@pytest.fixture
def on_sqlite(stack: StackProcess) -> StackProcess:
    """The module's SQLite stack: a test of what no database answers runs once."""
    if stack.env.get("TRAINYARD_DATABASE_URL", "").startswith("postgresql"):
        pytest.skip("answered by the wire and the engine alone; run on SQLite")
    return stack


def tinker_key(stack: StackProcess, org: str) -> str:
    """A member's key as `trainyard admin create-key --tinker` prints it."""
    made = stack.cli("admin", "create-key", "--org", org, "--role", "member", "--tinker")
    key = made.stdout.strip()
    assert key.startswith("tml-"), "the key is printed for the tinker SDK"
    return key


def datum(text: str = TEXT) -> types.Datum:
    ids = list(text.encode())
    return types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )


def service(stack: StackProcess, key: str) -> tinker.ServiceClient:
    return tinker.ServiceClient(base_url=stack.url, api_key=key)


def test_the_example_trains_unchanged_with_the_two_variables_and_no_hub(
    on_sqlite: StackProcess, tmp_path: Path
) -> None:
    stack = on_sqlite
    key = tinker_key(stack, f"org-{secrets.token_hex(4)}")
    env = {
        **os.environ,
        "TINKER_BASE_URL": stack.url,
        "TINKER_API_KEY": key,
        # No hub and an empty cache: the tokenizer comes from what the server names.
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tinker_sl.py"), "--steps", "20"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    losses = json.loads(done.stdout.strip().splitlines()[-1])["losses"]
    assert len(losses) == 20
    assert losses[-1] < losses[0] * 0.85, losses
    assert "checkpoints: ['sampler_weights/final']" in done.stdout
    assert "sampler weights tinker://" in done.stdout


def test_pipelined_calls_run_in_order_and_the_run_lists_its_checkpoints(
    stack: StackProcess,
) -> None:
    org = f"org-{secrets.token_hex(4)}"
    key = tinker_key(stack, org)
    with service(stack, key) as sc:
        training = sc.create_lora_training_client(base_model=BASE, rank=8, seed=1).result()
        assert training.get_info().model_data.model_name == BASE
        # Three rounds submitted before any result is read.
        futures = []
        for _ in range(3):
            futures.append(training.forward_backward([datum()], "cross_entropy"))
            futures.append(training.optim_step(types.AdamParams(learning_rate=4e-3)))
        results = [f.result() for f in futures]
        losses = [r.metrics["loss:sum"] for r in results[0::2]]
        assert losses[2] < losses[1] < losses[0], losses
        saved = training.save_state("ckpt1").result()
        run_id = training.model_id
        assert saved.path == f"tinker://{run_id}/weights/ckpt1"

        # Trainyard shows the same client: three optimizer steps, calls in order.
        clients = httpx.get(
            f"{stack.url}/v1/train/clients", headers=bearer(key.removeprefix("tml-"))
        ).json()["clients"]
        assert [(c["step"], c["seq"]) for c in clients] == [(3, 7)]

        rest = tinker.RestClient(base_url=stack.url, api_key=key)
        runs = rest.list_training_runs().result().training_runs
        assert [r.training_run_id for r in runs] == [run_id]
        assert runs[0].last_checkpoint is not None
        assert runs[0].last_checkpoint.tinker_path == saved.path
        checkpoints = rest.list_checkpoints(run_id).result().checkpoints
        assert [(c.checkpoint_id, c.checkpoint_type) for c in checkpoints] == [
            ("weights/ckpt1", "training")
        ]

        # Deleting the checkpoint deletes the org's object behind it.
        def loras() -> list[str]:
            listed = httpx.get(
                f"{stack.url}/v1/train/artifacts", headers=bearer(key.removeprefix("tml-"))
            ).json()
            return [a["sha256"] for a in listed.get("artifacts", []) if a["kind"] == "lora"]

        assert len(loras()) == 1
        rest.delete_checkpoint(run_id, "weights/ckpt1").result()
        assert rest.list_checkpoints(run_id).result().checkpoints == []
        assert loras() == []
        with pytest.raises(tinker.NotFoundError):
            rest.delete_checkpoint(run_id, "weights/ckpt1").result()
    # Leaving the session deleted its client: its engine slot is free again.
    after = httpx.get(f"{stack.url}/v1/train/clients", headers=bearer(key.removeprefix("tml-")))
    assert [c["status"] for c in after.json()["clients"]] == ["deleted"]


def test_another_orgs_run_answers_as_an_unknown_one(on_sqlite: StackProcess) -> None:
    stack = on_sqlite
    owner = tinker_key(stack, f"org-{secrets.token_hex(4)}")
    other = tinker_key(stack, f"org-{secrets.token_hex(4)}")
    with service(stack, owner) as sc:
        training = sc.create_lora_training_client(base_model=BASE, rank=4).result()
        training.forward_backward([datum()], "cross_entropy").result()
        training.optim_step(types.AdamParams(learning_rate=4e-3)).result()
        # The RL loop's sampler: weights saved without a name, sampled at once.
        sampler = training.save_weights_and_get_sampling_client().result()
        answer = sampler.sample(
            types.ModelInput.from_ints(list(b"the ")),
            1,
            types.SamplingParams(max_tokens=4, temperature=0.0),
        ).result()
        assert len(answer.sequences[0].tokens) == 4
        run_id = training.model_id
        rest = tinker.RestClient(base_url=stack.url, api_key=other)
        assert rest.list_training_runs().result().training_runs == []
        with pytest.raises(tinker.NotFoundError) as refused:
            rest.list_checkpoints(run_id).result()
        assert "No such model, sampler, run or future in your org." in str(refused.value)


def test_a_wrong_key_is_refused_at_once_with_what_to_do(on_sqlite: StackProcess) -> None:
    stack = on_sqlite
    # AuthenticationError is the SDK's 401, which it never retries: a 5xx or 429 here
    # would be retried for minutes and end as another error.
    with pytest.raises(tinker.AuthenticationError) as refused:
        service(stack, "tml-not-a-trainyard-key").create_lora_training_client(
            base_model=BASE
        ).result()
    assert "trainyard admin create-key --tinker" in str(refused.value)
    # A Trainyard key as it is, without `tml-`: the SDK itself refuses it before sending.
    plain = stack.create_key(f"org-{secrets.token_hex(4)}")
    with pytest.raises(tinker.TinkerError, match="tml-"):
        service(stack, plain).create_lora_training_client(base_model=BASE).result()


def test_forward_changes_nothing_and_an_rl_loss_answers_its_elementwise_terms(
    on_sqlite: StackProcess,
) -> None:
    stack = on_sqlite
    key = tinker_key(stack, f"org-{secrets.token_hex(4)}")
    with service(stack, key) as sc:
        training = sc.create_lora_training_client(base_model=BASE, rank=4, seed=2).result()
        first = training.forward([datum()], "cross_entropy").result()
        again = training.forward([datum()], "cross_entropy").result()
        assert first.metrics["loss:sum"] == pytest.approx(again.metrics["loss:sum"])
        logprobs = first.loss_fn_outputs[0]["logprobs"].tolist()
        assert len(logprobs) == len(TEXT) - 1 and all(lp < 0 for lp in logprobs)
        trained = training.forward_backward([datum()], "cross_entropy").result()
        assert trained.metrics["loss:sum"] == pytest.approx(first.metrics["loss:sum"], rel=1e-5)

        ids = list(TEXT.encode())
        rl = types.Datum(
            model_input=types.ModelInput.from_ints(ids[:-1]),
            loss_fn_inputs={
                "target_tokens": ids[1:],
                "logprobs": logprobs,
                "advantages": [1.0] * (len(ids) - 1),
            },
        )
        out = training.forward_backward([rl], "importance_sampling").result()
        terms = out.loss_fn_outputs[0]["elementwise_loss"].tolist()
        assert len(terms) == len(ids) - 1
        assert sum(terms) == pytest.approx(out.metrics["loss:sum"], rel=1e-4)


def test_saved_weights_sample_and_score_and_a_state_continues_as_if_uninterrupted(
    stack: StackProcess,
) -> None:
    key = tinker_key(stack, f"org-{secrets.token_hex(4)}")
    adam = types.AdamParams(learning_rate=4e-3)
    with service(stack, key) as sc:
        training = sc.create_lora_training_client(base_model=BASE, rank=4, seed=3).result()
        for _ in range(3):
            training.forward_backward([datum()], "cross_entropy")
            training.optim_step(adam).result()
        state = training.save_state("mid").result()
        uninterrupted = []
        for _ in range(2):
            uninterrupted.append(
                training.forward_backward([datum()], "cross_entropy").result().metrics["loss:sum"]
            )
            training.optim_step(adam).result()
        saved = training.save_weights_for_sampler("s1").result()
        assert saved.path == f"tinker://{training.model_id}/sampler_weights/s1"
    # A new session: the first one's client is gone, what it saved is the org's.
    with service(stack, key) as sc:
        sampler = sc.create_sampling_client(model_path=saved.path).result()
        prompt = types.ModelInput.from_ints(list(b"the quick"))
        answer = sampler.sample(
            prompt, 2, types.SamplingParams(max_tokens=6, temperature=0.0)
        ).result()
        assert len(answer.sequences) == 2
        assert answer.sequences[0].tokens == answer.sequences[1].tokens
        assert len(answer.sequences[0].tokens) == len(answer.sequences[0].logprobs or []) > 0
        scored = sampler.compute_logprobs(prompt).result()
        assert len(scored) == len(b"the quick") and scored[0] is None
        assert all(lp is not None and lp < 0 for lp in scored[1:])

        resumed = sc.create_training_client_from_state_with_optimizer(state.path).result()
        continued = []
        for _ in range(2):
            continued.append(
                resumed.forward_backward([datum()], "cross_entropy").result().metrics["loss:sum"]
            )
            resumed.optim_step(adam).result()
        assert continued == pytest.approx(uninterrupted, rel=1e-4)


def test_an_executor_killed_under_a_call_raises_request_failed(on_sqlite: StackProcess) -> None:
    stack = on_sqlite
    key = tinker_key(stack, f"org-{secrets.token_hex(4)}")
    with service(stack, key) as sc:
        training = sc.create_lora_training_client(base_model=BASE, rank=4).result()
        training.forward_backward([datum()], "cross_entropy").result()
        os.kill(int(stack.info()["pids"]["executor"]), signal.SIGKILL)
        with pytest.raises(tinker.RequestFailedError):
            training.forward_backward([datum()], "cross_entropy").result()
