"""Pure logic of jobs: planning formulas, duration admission, datasets, strict input, the
lifecycle's state machine."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from services.core import errors, states
from services.core.datasets import check_upload
from services.core.tables import JobRow
from services.core.validation import parse_json_job
from services.jobs import frozen, spec
from tests.support import EXAMPLE
from trainyard.job.v1 import job_pb2, model_pb2
from trainyard.training import datasets, planning
from trainyard.training.catalog import Catalog


def hp(**kw: int) -> job_pb2.Hyperparameters:
    return job_pb2.Hyperparameters(
        per_device_train_batch_size=4, gradient_accumulation_steps=2, **kw
    )


def test_the_seed_example_152_examples_at_batch_8_for_3_epochs() -> None:
    got = planning.plan(160, hp(num_train_epochs=3))
    assert (got.train_examples, got.eval_examples, got.steps_per_epoch, got.planned_steps) == (
        152,
        8,
        19,
        57,
    )


@pytest.mark.parametrize(
    ("selected", "evals"),
    [
        (0, 0),
        (7, 0),
        (159, 0),
        (160, 8),
        (161, 8),
        (179, 8),
        (180, 9),
        (10_240, 512),
        (99_999, 512),
    ],
)
def test_the_eval_split_starts_at_160_and_caps_at_512(selected: int, evals: int) -> None:
    assert planning.eval_count(selected) == evals


def test_a_partial_last_batch_is_a_step_and_max_steps_wins() -> None:
    assert planning.plan(9, hp(num_train_epochs=1)).steps_per_epoch == 2
    assert planning.plan(1000, hp(max_steps=7)).planned_steps == 7
    assert planning.plan(1000, hp(num_train_epochs=3), step_bound=10).planned_steps == 10


def test_early_stopping_without_an_eval_set_is_a_recorded_downgrade() -> None:
    assert planning.plan(100, hp(num_train_epochs=1, early_stopping_patience=2)).downgrades == (
        "early_stopping:disabled:no_eval_set",
    )
    assert planning.plan(200, hp(num_train_epochs=1, early_stopping_patience=2)).downgrades == ()


# The product API's published figures for its 9B profile: 100 steps project 5,250 s at
# sequence 512 and 14,700 s at 2,048; at 4,096 76 steps (21,540 s) pass and 77 (21,780 s) do not.
SEED_PROFILE = model_pb2.DurationModel(
    fixed_seconds=1500,
    reference_seq_length=512,
    reference_step_seconds=19.5,
    step_seconds_per_token=63 / 1024,
)


@pytest.mark.parametrize(
    ("steps", "seq", "projected"),
    [(100, 512, 5250), (100, 2048, 14700), (76, 4096, 21540), (77, 4096, 21780)],
)
def test_duration_admission_reproduces_the_seed_figures(
    steps: int, seq: int, projected: float
) -> None:
    got = planning.projected_active_seconds(planning.workload_seconds(SEED_PROFILE, steps, seq))
    assert got == pytest.approx(projected)
    assert (got <= 21_600) == (projected <= 21_600)


def chat(*messages: tuple[str, str], tags: tuple[str, ...] = ()) -> datasets.Row:
    return datasets.Row(id=str(hash(messages)), name="x", tags=tags, messages=messages)


def test_dataset_checks_empty_unusable_and_conflict_with_the_count() -> None:
    with pytest.raises(datasets.DatasetError) as caught:
        datasets.check([], system_prompt="", loss_mask="assistant_only")
    assert caught.value.reason == "TRAINING_DATASET_EMPTY"
    blank = [chat(("user", "hi"), ("assistant", "  "))]
    with pytest.raises(datasets.DatasetError) as caught:
        datasets.check(blank, system_prompt="", loss_mask="assistant_only")
    assert caught.value.reason == "TRAINING_DATASET_UNUSABLE"
    rows = [chat(("system", "be nice"), ("user", "a"), ("assistant", "b")) for _ in range(3)]
    rows.append(chat(("user", "a"), ("assistant", "c")))
    with pytest.raises(datasets.DatasetError) as caught:
        datasets.check(rows, system_prompt="Be brief.", loss_mask="assistant_only")
    assert (
        caught.value.reason == "TRAINING_DATASET_CONFLICT"
        and caught.value.metadata["conflicts"] == "3"
    )


def test_tags_select_the_union_and_unknown_tags_are_refused() -> None:
    rows = datasets.fixture_rows()
    assert len(datasets.select(rows, ["reverse", "upper", "reverse"])) == 80
    with pytest.raises(datasets.DatasetError) as caught:
        datasets.select(rows, ["nope"])
    assert caught.value.reason == "TRAINING_DATASET_SELECTION_INVALID"


def test_uploaded_rows_parse_and_a_bad_line_is_named_by_number() -> None:
    good = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    assert [r.messages for r in datasets.parse_jsonl(good * 2)] == [
        (("user", "hi"), ("assistant", "yo"))
    ] * 2
    with pytest.raises(datasets.DatasetError) as caught:
        datasets.parse_jsonl(good + b'{"messages": "SECRET"}\n')
    assert (
        caught.value.reason == "TRAINING_DATASET_UNUSABLE" and caught.value.metadata["line"] == "2"
    )
    assert "SECRET" not in str(caught.value)


CHAT = (
    b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
)


@pytest.mark.parametrize(
    ("line", "message", "where"),
    [
        (
            b'{"messages": [{"role": "user", "content": "SECRET',
            "Line 2 is not valid JSON: its first error is at column 43.",
            {"problem": "invalid_json", "column": "43"},
        ),
        (
            b'{"messages": [{"role": "user", "content": "SECRET \xff"}]}',
            "Line 2 is not UTF-8 text: its first bad byte is byte 51.",
            {"problem": "not_utf8", "byte": "51"},
        ),
        (
            b'{"messages": [{"role": "SECRET", "content": "x"}]}',
            "Line 2 has messages[0].role that is not one of system, user, assistant.",
            {
                "problem": "unknown_role",
                "row_field": "messages[0].role",
                "supported": "system,user,assistant",
            },
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}, {"content": "SECRET"}]}',
            "Line 2 has messages[1].role that is not one of system, user, assistant.",
            {
                "problem": "unknown_role",
                "row_field": "messages[1].role",
                "supported": "system,user,assistant",
            },
        ),
        (
            b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "SECRET"}]}]}',
            "Line 2 has messages[0].content that is not a string: a message's content is its "
            "text, not a list of parts.",
            {"problem": "content_not_text", "row_field": "messages[0].content"},
        ),
        (
            b'{"prompt": "SECRET", "completion": "SECRET"}',
            'Line 2 is a prompt/completion row, not the chat format: write each as {"messages": '
            '[{"role": "user", "content": PROMPT}, {"role": "assistant", "content": COMPLETION}]}.',
            {"problem": "prompt_completion", "row_field": "messages"},
        ),
        (
            b'{"text": "SECRET"}',
            'Line 2 has no messages list; a row is one chat, {"messages": [{"role": "user", '
            '"content": "..."}, ...]}.',
            {"problem": "no_messages", "row_field": "messages"},
        ),
        (
            b'["SECRET"]',
            'Line 2 is not a JSON object; a row is one chat, {"messages": [{"role": "user", '
            '"content": "..."}, ...]}.',
            {"problem": "not_object"},
        ),
        (
            b'{"messages": ["SECRET"]}',
            "Line 2 has messages[0] that is not an object with a role and a content.",
            {"problem": "message_not_object", "row_field": "messages[0]"},
        ),
        (
            b'{"messages": [], "tags": "SECRET"}',
            "Line 2 has tags that are not a list of strings.",
            {"problem": "tags_not_text", "row_field": "tags"},
        ),
        (
            b"[" * 100_000,
            "Line 2 holds JSON past what a row may: a number too long or nesting too deep.",
            {"problem": "json_too_large"},
        ),
    ],
    ids=[
        "cut",
        "not-utf8",
        "unknown-role",
        "no-role",
        "list-content",
        "prompt-completion",
        "no-messages",
        "not-object",
        "message-not-object",
        "tags",
        "too-deep",
    ],
)
def test_a_row_that_is_not_a_chat_is_refused_saying_what_is_wrong_without_quoting_it(
    line: bytes, message: str, where: dict[str, str]
) -> None:
    with pytest.raises(datasets.DatasetError) as caught:
        datasets.parse_jsonl(CHAT + line + b"\n" + CHAT)
    assert (caught.value.reason, caught.value.field) == ("TRAINING_DATASET_UNUSABLE", "dataset.uri")
    assert str(caught.value) == message
    assert caught.value.metadata == {"line": "2", **where}
    assert "SECRET" not in str(caught.value) + repr(caught.value.metadata)


def test_an_upload_of_blank_lines_alone_is_empty() -> None:
    with pytest.raises(errors.DomainError) as caught:
        check_upload(b"\n  \n\t\n")
    assert caught.value.reason == "TRAINING_DATASET_EMPTY"
    assert str(caught.value) == "The dataset holds no rows: each of its lines is to be one chat."


def test_the_eval_split_is_the_same_for_the_same_rows_in_any_order() -> None:
    rows = datasets.fixture_rows()
    first = datasets.eval_ids(rows, "assistant_only")
    assert first == datasets.eval_ids(list(reversed(rows)), "assistant_only")
    assert first == {r.id for r in rows if datasets.on_eval_side(r.id)} and len(first) >= 8
    snap = datasets.build_snapshot(rows, "assistant_only")
    assert snap.sha256 == datasets.build_snapshot(rows, "assistant_only").sha256


def chat_line(i: int) -> bytes:
    doc = {"id": f"grown-{i}", "messages": [{"role": "user", "content": f"q{i}"},
                                            {"role": "assistant", "content": f"a{i}"}]}  # fmt: skip
    return json.dumps(doc).encode() + b"\n"


def test_a_dataset_grown_a_row_at_a_time_moves_no_example_across_the_split() -> None:
    # From a selection that has its eval set, 1,000 rows added one at a time: each lands
    # on the side its identity gives it and nothing already placed changes side.
    data = b"".join(chat_line(i) for i in range(200))
    snapshot = datasets.build_snapshot(datasets.parse_jsonl(data), "assistant_only")
    placed = {row.id: split for row, split in snapshot.items}
    assert "eval" in placed.values()
    for i in range(200, 1200):
        data += chat_line(i)
        rows = datasets.parse_jsonl(data)
        held = datasets.eval_ids(rows, "assistant_only")
        now = {row.id: "eval" if row.id in held else "train" for row in rows}
        assert {k: now[k] for k in placed} == placed, f"a row changed side at row {i}"
        assert now[f"grown-{i}"] == ("eval" if datasets.on_eval_side(f"grown-{i}") else "train")
        placed = now
    assert 0.03 < sum(v == "eval" for v in placed.values()) / len(placed) < 0.07


def test_the_eval_split_keeps_the_policys_bounds() -> None:
    rows = datasets.parse_jsonl(b"".join(chat_line(i) for i in range(400)))
    side = [r for r in rows if datasets.on_eval_side(r.id)]
    rest = [r for r in rows if not datasets.on_eval_side(r.id)]
    assert datasets.eval_ids(side[:8] + rest[:151], "assistant_only") == set()  # under 160
    assert datasets.eval_ids(side[:7] + rest[:193], "assistant_only") == set()  # 7 on the side
    assert datasets.eval_ids(side[:8] + rest[:152], "assistant_only") == {r.id for r in side[:8]}
    many = datasets.parse_jsonl(b"".join(chat_line(i) for i in range(12_000)))
    ranked = sorted(
        (datasets.identity_hash(r.id), r.id) for r in many if datasets.on_eval_side(r.id)
    )
    assert len(ranked) > 512
    assert datasets.eval_ids(many, "assistant_only") == {i for _, i in ranked[:512]}


FIXTURE = {
    "base_model": "fixture-tiny-llm",
    "dataset": {"uri": "fixture:synthetic-tiny-v1"},
    "resources": {"budget": 100},
}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**FIXTURE, "worker_url": "http://x"}, "worker_url"),
        ({**FIXTURE, "hyperparameters": {"callback": 1}}, "hyperparameters.callback"),
        # A key that is not shaped like a name is not repeated: its object is named.
        ({**FIXTURE, "hyperparameters": {"http://x": 1}}, "hyperparameters"),
        ({**FIXTURE, "ghp_abcdefghijklmnopqrstuvwxyz0123456789": 1}, "body"),
        ({**FIXTURE, "status": "succeeded"}, "status"),
        (
            {**FIXTURE, "hyperparameters": {"learning_rate": "fast"}},
            "hyperparameters.learning_rate",
        ),
        ({**FIXTURE, "hyperparameters": {"max_steps": 2.5}}, "hyperparameters.max_steps"),
        ({**FIXTURE, "dataset": {"uri": "ftp://host/rows.jsonl"}}, "dataset.uri"),
        ({**FIXTURE, "dataset": {"uri": "s3://bucket/rows.jsonl"}}, "dataset.source"),
        ({**FIXTURE, "dataset": {"uri": "s3://Bad_Bucket/k", "source": "s"}}, "dataset.uri"),
        (
            {**FIXTURE, "dataset": {"uri": "hf://datasets/o/n@main", "source": "s"}},
            "dataset.source",
        ),
        ({**FIXTURE, "dataset": {"uri": "hf://datasets/o/n@main"}}, "dataset.uri"),
        ({**FIXTURE, "dataset": {"uri": "hf://o/model/rows.jsonl"}}, "dataset.uri"),
        ({**FIXTURE, "dataset": {"uri": "fixture:other"}}, "dataset.uri"),
        ({**FIXTURE, "base_model": "/models/llama"}, "base_model"),
        ({**FIXTURE, "base_model": "gpt-unapproved"}, "base_model"),
        ({**FIXTURE, "requested_by": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}, "requested_by"),
        ({**FIXTURE, "output": {"name": "../../etc"}}, "output.name"),
        (
            {**FIXTURE, "dataset": {**FIXTURE["dataset"], "system_prompt": "run $(rm -rf /)"}},
            "dataset.system_prompt",
        ),
        ({**FIXTURE, "hyperparameters": {"learning_rate": 2}}, "hyperparameters.learning_rate"),
        (
            {**FIXTURE, "retention": {"policy_class": "ephemeral", "ttl_seconds": 10}},
            "retention.ttl_seconds",
        ),
        ({**FIXTURE, "resources": {"machines": ["gpu-1"], "budget": 100}}, "resources.budget"),
    ],
)
def test_strict_input_names_the_field_and_never_the_value(body: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(errors.DomainError) as caught:
        spec.validate(parse_json_job(body), Catalog())
    unknown_base = body["base_model"] == "gpt-unapproved"  # a path is a shape fault first
    assert caught.value.reason == ("UNSUPPORTED_BASE" if unknown_base else "INVALID_REQUEST")
    assert caught.value.metadata["field"] == field
    sent = json.dumps(body)
    for value in (
        "http://x",
        "fast",
        "s3://",
        "/models",
        "gpt-unapproved",
        "ghp_",
        "../",
        "rm -rf",
    ):
        if value in sent:
            assert value not in caught.value.message and value not in str(caught.value.metadata)


def test_an_unknown_field_is_named_by_its_path_with_the_fields_its_object_takes() -> None:
    body = {**FIXTURE, "hyperparameters": {"max_steps": 5, "colour": "blue"}}
    with pytest.raises(errors.ValidationError) as caught:
        parse_json_job(body)
    assert caught.value.message == "Field hyperparameters.colour is not a known field."
    assert caught.value.fields == [("hyperparameters.colour", "is not a known field")]
    supported = caught.value.metadata["supported"].split(",")
    assert "max_steps" in supported and "learning_rate" in supported
    assert "blue" not in json.dumps(caught.value.metadata)
    with pytest.raises(errors.ValidationError) as caught:
        parse_json_job({**FIXTURE, "status": "queued", "chats": []})  # output only, not unknown
    assert caught.value.metadata["field"] == "status"
    with pytest.raises(errors.ValidationError) as caught:
        parse_json_job({**FIXTURE, "colour": 1})
    top = caught.value.metadata["supported"].split(",")
    assert "base_model" in top and "status" not in top and "number" not in top


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({**FIXTURE, "adaptation": {"mode": "qlora"}}, "UNSUPPORTED_ADAPTATION"),
        (
            {**FIXTURE, "objective": {"terms": [{"kind": "consistency", "weight": 1}]}},
            "UNSUPPORTED_OBJECTIVE",
        ),
        ({**FIXTURE, "protect": {"suites": ["ag_news"]}}, "UNSUPPORTED_PROTECT"),
        ({**FIXTURE, "output": {"kind": "merged"}}, "UNSUPPORTED_OUTPUT"),
        ({**FIXTURE, "resources": {"devices": ["metal"]}}, "UNSUPPORTED_DEVICE"),
        ({**FIXTURE, "evaluation": {"suites": ["labels"]}}, "UNSUPPORTED_EVALUATION"),
    ],
)
def test_choices_outside_the_support_table_name_what_is_supported(body: dict, reason: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(errors.DomainError) as caught:
        spec.validate(parse_json_job(body), Catalog())
    assert caught.value.reason == reason
    assert "supported" in caught.value.metadata


def test_checks_run_in_hip_order_shape_before_base() -> None:
    body = {
        "base_model": "unknown-model",
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "adaptation": {"mode": "nope"},
    }
    with pytest.raises(errors.DomainError) as caught:
        spec.validate(parse_json_job(body), Catalog())
    assert caught.value.metadata["field"] == "adaptation.mode"


def test_the_architecture_example_body_is_accepted_and_expanded() -> None:
    body = EXAMPLE
    job = parse_json_job(body)
    base = spec.validate(job, Catalog())
    expanded = spec.expand(job, base)
    assert expanded.hyperparameters.save_steps == 10 and expanded.adaptation.rank == 8
    assert expanded.idempotency_key == "nightly-42" and expanded.project == "support-bot"


def test_the_frozen_spec_reads_back_typed_without_its_plan() -> None:
    request = parse_json_job(EXAMPLE)
    job = spec.expand(request, spec.validate(request, Catalog()))
    frozen.apply_plan(job, planning.plan(160, job.hyperparameters))
    stored = frozen.spec_json(job)
    assert "planned_steps" not in stored and stored["output"]["name"] == "support-v1"
    back = JobRow(spec={**stored, "a_field_since_dropped": 1}).frozen()
    assert back.resources.max_seconds == 3600 and back.planned_steps == 0
    assert JobRow(spec=None).frozen() == job_pb2.Job()  # a tombstone's spec is gone


def test_the_plan_keeps_its_trainable_count_under_the_key_rows_have_always_held() -> None:
    plan = planning.plan(160, hp(num_train_epochs=3))
    kept = planning.FrozenPlan(**dataclasses.asdict(plan), projected_seconds=1887.5)
    stored = kept.to_json()
    assert stored["selected_examples"] == plan.trainable_examples == 160
    assert "trainable_examples" not in stored and stored["projected_seconds"] == 1887.5
    assert JobRow(plan=stored).planned() == kept
    assert JobRow(plan={}).planned().planned_steps == 0  # a tombstone's plan is gone


bad_values = st.text(min_size=6, max_size=40).map(lambda s: "Zq9" + s)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(
        ["base_model", "project", "requested_by", "idempotency_key", "revision", "unknown_x"]
    ),
    value=bad_values
    | st.integers()
    | st.lists(bad_values, max_size=2)
    | st.dictionaries(bad_values, bad_values, max_size=2),
)
def test_no_refusal_ever_holds_what_was_sent(key: str, value: object) -> None:
    body = {**FIXTURE, key: value}
    try:
        spec.validate(parse_json_job(body), Catalog())
    except errors.DomainError as exc:
        rendered = exc.message + json.dumps(exc.metadata) + json.dumps(exc.fields)
        for sent in _strings(value):
            assert sent not in rendered
    else:
        assert key in ("project", "requested_by", "idempotency_key")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    return []


class JobLifecycle(RuleBasedStateMachine):
    """Any sequence of moves, cancels and retries keeps the job table's promises."""

    def __init__(self) -> None:
        super().__init__()
        self.status = "queued"

    @rule(to=st.sampled_from(sorted(states.JOB_MOVES)))
    def move(self, to: str) -> None:
        before = self.status
        try:
            changed = states.check_move(states.JOB_MOVES, before, to)
        except errors.InvalidTransition:
            assert to != before and to not in states.JOB_MOVES[before]
            return
        assert changed == (to != before)
        assert before not in states.TERMINAL or not changed  # terminal states never change
        self.status = to

    @rule(held=st.booleans())
    def cancel(self, held: bool) -> None:
        try:
            plan = states.cancel_plan(self.status, held=held)
        except errors.DomainError as exc:
            assert (self.status == "finalizing" and exc.reason == "TRAINING_JOB_FINALIZING") or (
                self.status in states.TERMINAL - {"cancelled"}
                and exc.reason == "INVALID_TRANSITION"
            )
            return
        if plan == states.CancelPlan.NOW:
            assert self.status == "queued" or (self.status == "preparing" and not held)
            self.status = "cancelled"
        elif plan == states.CancelPlan.COOPERATIVE:
            assert states.check_move(states.JOB_MOVES, self.status, "cancelling")
            self.status = "cancelling"
        else:
            assert self.status in ("cancelling", "cancelled")

    @rule()
    def retry(self) -> None:
        if self.status in states.RETRYABLE:
            self.status = "queued"

    @invariant()
    def known_state(self) -> None:
        assert self.status in set(states.JobStatus)


TestJobLifecycle = JobLifecycle.TestCase


@pytest.mark.parametrize(
    ("moves", "ended"),
    [
        (states.JOB_MOVES, states.TERMINAL),
        (states.ATTEMPT_MOVES, states.ATTEMPT_TERMINAL),
        (states.TASK_MOVES, states.TASK_ENDED),
        (states.PREPARATION_MOVES, states.PREPARATION_ENDED),
    ],
)
def test_each_table_names_every_state_and_ended_states_allow_nothing(moves, ended) -> None:  # type: ignore[no-untyped-def]
    named = set(moves)
    assert all(targets <= named for targets in moves.values())
    assert all(not moves[state] for state in ended)
    assert all(moves[state] for state in named - ended)  # every other state can move on


# -- from -----------------------------------------------------------------------------------

ADAPTER = "c0" * 32


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**FIXTURE, "from": "not-a-sha256"}, "from"),
        ({**FIXTURE, "from": ADAPTER.upper()}, "from"),
        ({"base_model": "fixture-tiny-llm", "from": ADAPTER}, "dataset.uri"),
        ({**FIXTURE, "from": ADAPTER, "adaptation": {"mode": "full"}}, "from"),
        ({**FIXTURE, "from": ADAPTER, "adaptation": {"mode": "qlora"}}, "from"),
    ],
)
def test_a_from_outside_what_runs_is_refused_naming_its_field(body: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(errors.DomainError) as caught:
        spec.validate(parse_json_job(body), Catalog())
    assert (caught.value.reason, caught.value.metadata["field"]) == ("INVALID_REQUEST", field)
    assert (
        "not-a-sha256" not in caught.value.message and ADAPTER.upper() not in caught.value.message
    )


def test_a_from_is_checked_against_its_adapter_after_the_agreement_and_before_support() -> None:
    seen: list[str] = []
    body = {**FIXTURE, "from": ADAPTER, "output": {"kind": "merged"}}
    with pytest.raises(errors.DomainError) as caught:
        spec.validate(parse_json_job(body), Catalog(), lambda job: seen.append(spec.origin(job)))
    assert seen == [ADAPTER] and caught.value.reason == "UNSUPPORTED_OUTPUT"


def test_a_job_from_an_adapter_is_lora_by_default() -> None:
    request = parse_json_job({**FIXTURE, "from": ADAPTER})
    job = spec.expand(request, spec.validate(request, Catalog()))
    assert job.adaptation.mode == "lora" and spec.origin(job) == ADAPTER


DECISION = {"base_model": "fixture-tiny-decider", "dataset": {"uri": "fixture:decisions-tiny-v1"}}


@pytest.mark.parametrize(
    ("body", "field", "metadata"),
    [
        # HIP-1333 §3's example shape: a decision job across two machines.
        (
            {**DECISION, "resources": {"machines": ["gpu-1", "gpu-2"]}},
            "resources.machines",
            {"max": "1"},
        ),
        (
            {**FIXTURE, "dataset": {**FIXTURE["dataset"], "splits": {"train": "train"}}},
            "dataset.splits",
            {"supported": ""},
        ),
        (
            {**FIXTURE, "dataset": {**FIXTURE["dataset"], "splits": {"test": "x"}}},
            "dataset.splits",
            {"supported": "train,validation"},
        ),
        (
            {**FIXTURE, "hyperparameters": {"base_load_precision": "fp16"}},
            "hyperparameters.base_load_precision",
            {"supported": "fp32,bf16"},
        ),
        (
            {**DECISION, "hyperparameters": {"base_load_precision": "bf16"}},
            "hyperparameters.base_load_precision",
            {"supported": "fp32"},
        ),
    ],
)
def test_what_no_executor_would_run_is_refused_at_create_naming_its_field(
    body: dict,  # type: ignore[type-arg]
    field: str,
    metadata: dict[str, str],
) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        spec.validate(parse_json_job(body), Catalog())
    assert caught.value.metadata["field"] == field
    assert metadata.items() <= caught.value.metadata.items()


def test_a_decision_job_on_one_named_machine_and_a_language_job_on_two_are_accepted() -> None:
    spec.validate(parse_json_job({**DECISION, "resources": {"machines": ["gpu-1"]}}), Catalog())
    two = {**FIXTURE, "resources": {"machines": ["gpu-1", "gpu-2"]}}
    spec.validate(parse_json_job(two), Catalog())


# -- the expected price's seconds ------------------------------------------------------------


def test_fixture_expected_seconds_are_its_profile_not_the_admission_tolerance() -> None:
    from trainyard.training.catalog import FIXTURE

    model = FIXTURE.to_proto().profile.duration
    got = planning.expected_seconds(model, 5, 256, FIXTURE.post_processing_seconds)
    # 5 steps of 0.5 s and 5 s of saving (loading is never charged): seconds, not 30 minutes.
    assert got == pytest.approx(7.5)
    # Admission's ceiling still adds the profile's loading and the seed's tolerance.
    projected = planning.projected_active_seconds(planning.workload_seconds(model, 5, 256))
    assert projected == pytest.approx(1832.5)


def test_measured_step_times_replace_the_profiles() -> None:
    from trainyard.training.catalog import FIXTURE

    model = FIXTURE.to_proto().profile.duration
    # Three trainers' loops: 20 steps in 40 s, 10 in 30 s, 20 in 20 s.
    measured = planning.measured_step_seconds([(40.0, 20), (30.0, 10), (20.0, 20)])
    assert measured == pytest.approx(2.0)
    got = planning.expected_seconds(model, 5, 256, 5.0, measured)
    assert got == pytest.approx(5 * 2.0 + 5.0)
    assert planning.measured_step_seconds([]) is None
    assert planning.measured_step_seconds([(40.0, 0), (0.0, 5)]) is None
