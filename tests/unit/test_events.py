"""The executor's events, typed: each kind reads from the wire and writes back to it
unchanged; every event ClaimService refused before the typing is refused still, naming the
same field with the same sentence; the trainer's JSON lines read as the same events."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.wire import protocol
from services.claims.reports import numbered, parse_events
from services.core import errors
from trainyard.claim.v1 import task_pb2
from trainyard.job.v1 import job_pb2
from trainyard.training import events

SHA = "ab" * 32

RESULT = task_pb2.TaskResult(
    sha256=SHA, base_sha256="cd" * 32, step=57, served_step=50, dataset_sha256="ef" * 32,
    training_config_sha256="01" * 32, checkpoint_sha256="23" * 32, training_seconds=31.2,
    checkpoint_step=57, evaluation=job_pb2.Evaluation(best_loss=1.5, best_step=50),
    outcome=job_pb2.Outcome(stop_reason="early_stopping", downgrades=["a:b:c"]),
)  # fmt: skip
WIRE = [
    task_pb2.TaskEvent(seq=1, type="status", status="running"),
    task_pb2.TaskEvent(seq=2, type="status", status="failed", error="trainer_failed"),
    task_pb2.TaskEvent(seq=3, type="status", status="done"),
    task_pb2.TaskEvent(seq=4, type="coordinator", addr="10.0.0.7:29500"),
    task_pb2.TaskEvent(seq=5, type="coordinator", addr="[::1]:29500"),
    task_pb2.TaskEvent(seq=6, type="metric", name="loss", step=3, value=2.5),
    task_pb2.TaskEvent(seq=7, type="metric", name="eval/loss", step=0, value=0.0),
    task_pb2.TaskEvent(seq=8, type="log", line="step 3 done"),
    task_pb2.TaskEvent(seq=12, type="stdio", text="Traceback (most recent call last):\n"),
    task_pb2.TaskEvent(seq=9, type="artifact", sha256=SHA),
    task_pb2.TaskEvent(seq=10, type="result", result=RESULT),
    task_pb2.TaskEvent(seq=11, type="result", result=task_pb2.TaskResult(step=1)),
]


@pytest.mark.parametrize("proto", WIRE, ids=lambda p: f"{p.seq}-{p.type}")
def test_each_kind_reads_from_the_wire_and_writes_back_unchanged(
    proto: task_pb2.TaskEvent,
) -> None:
    typed = events.parse(proto)
    assert typed.type == proto.type and typed.seq == proto.seq
    assert events.to_proto(typed) == proto


def test_each_kind_is_its_own_class() -> None:
    kinds = {type(events.parse(p)) for p in WIRE}
    assert kinds == {
        events.Status, events.Coordinator, events.Metric, events.Log, events.Stdio,
        events.Artifact, events.Result,
    }  # fmt: skip


REFUSED = [
    (task_pb2.TaskEvent(seq=-1, type="log", line="x"), "events.seq", "must not be negative"),
    (
        task_pb2.TaskEvent(seq=1, type="status", status="succeeded"),
        "events.status",
        "is not a status an executor reports",
    ),
    (
        task_pb2.TaskEvent(seq=1, type="status", status="failed", error="Not A Code"),
        "events.error",
        "must be a short lower-case code",
    ),
    (
        task_pb2.TaskEvent(seq=1, type="coordinator", addr="http://host:1/"),
        "events.addr",
        "must be host:port",
    ),
    (
        task_pb2.TaskEvent(seq=1, type="metric", name="Loss", step=1, value=1.0),
        "events.name",
        "must name a series and carry a value",
    ),
    (
        task_pb2.TaskEvent(seq=1, type="metric", name="loss", step=1),
        "events.name",
        "must name a series and carry a value",
    ),
    (
        task_pb2.TaskEvent(seq=1, type="artifact", sha256="AB" * 32),
        "events.sha256",
        "must be a sha256",
    ),
    (task_pb2.TaskEvent(seq=1, type="output"), "events.type", "is not an event type"),
    (task_pb2.TaskEvent(seq=1), "events.type", "is not an event type"),
]


@pytest.mark.parametrize(
    ("proto", "field", "message"), REFUSED, ids=[f"{p.type or 'none'}-{f}" for p, f, _ in REFUSED]
)
def test_every_refusal_names_its_field(proto: task_pb2.TaskEvent, field: str, message: str) -> None:
    with pytest.raises(events.InvalidEvent) as refused:
        events.parse(proto)
    assert (refused.value.field, refused.value.message) == (field, message)
    with pytest.raises(errors.ValidationError) as answered:
        parse_events([WIRE[0], proto])
    assert answered.value.fields == [(field, message)]
    assert answered.value.reason == "INVALID_REQUEST"


@pytest.mark.parametrize(
    ("proto", "supported"),
    [
        (
            task_pb2.TaskEvent(seq=1, type="status", status="succeeded"),
            "accepted,running,evaluating,finalizing,failed,stopped,cancelled,done",
        ),
        (
            task_pb2.TaskEvent(seq=1, type="output"),
            "status,coordinator,metric,log,stdio,artifact,result",
        ),
    ],
)
def test_a_closed_set_refusal_carries_the_set(proto: task_pb2.TaskEvent, supported: str) -> None:
    with pytest.raises(errors.ValidationError) as answered:
        parse_events([proto])
    assert answered.value.metadata["supported"] == supported


def test_a_report_without_numbers_is_numbered_after_the_last_applied_in_arrival_order() -> None:
    """HIP-1333 §5's report body carries no `seq`."""
    sent = [
        task_pb2.TaskEvent(type="metric", name="nll", step=100, value=0.66),
        task_pb2.TaskEvent(type="log", line="b"),
        task_pb2.TaskEvent(type="metric", name="nll", step=99, value=0.7),
    ]
    typed = parse_events(sent)
    assert [e.seq for e in typed] == [0, 0, 0]
    applied = numbered(typed, 41)
    assert [(e.seq, e.type) for e in applied] == [(42, "metric"), (43, "log"), (44, "metric")]
    assert [getattr(e, "step", None) for e in applied] == [100, None, 99]
    # A numbered report keeps its own numbers, in their order.
    ordered = numbered(parse_events([WIRE[1], WIRE[0]]), 41)
    assert [e.seq for e in ordered] == [1, 2]


def test_a_report_mixing_numbered_and_unnumbered_events_is_refused() -> None:
    mixed = [WIRE[0], task_pb2.TaskEvent(type="log", line="x")]
    with pytest.raises(errors.ValidationError) as answered:
        parse_events(mixed)
    assert answered.value.fields == [
        ("events.seq", "must be set on every event of a report or on none")
    ]


def test_a_report_holds_at_most_500_events() -> None:
    many = [task_pb2.TaskEvent(seq=n, type="log", line="x") for n in range(1, 502)]
    with pytest.raises(errors.ValidationError) as answered:
        parse_events(many)
    assert answered.value.fields == [("events", "must hold at most 500 events")]
    assert len(parse_events(many[:500])) == 500


def test_a_trainers_output_goes_in_pieces_that_join_back_and_fit_the_wire() -> None:
    text = "step 1\n" + "é" * 5000 + "\nRuntimeError: boom\n"
    pieces = events.Stdio.pieces(text)
    assert "".join(p.text for p in pieces) == text
    assert all(len(p.text.encode()) <= events.MAX_LOG_BYTES for p in pieces) and len(pieces) == 3
    with pytest.raises(errors.ValidationError) as answered:
        parse_events([task_pb2.TaskEvent(seq=1, type="stdio", text="é" * 2049)])
    assert answered.value.fields == [("events.text", "must be at most 4096 bytes")]


def test_a_long_log_line_is_cut_at_a_character() -> None:
    typed = events.parse(task_pb2.TaskEvent(seq=1, type="log", line="é" * 5000))
    assert isinstance(typed, events.Log)
    assert typed.line == "é" * 2048


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"type": "status", "status": "running"}', events.Status("running")),
        ('{"type":"coordinator","addr":"h:1"}', events.Coordinator("h:1")),
        ('{"type":"metric","name":"loss","step":3,"value":2}', events.Metric("loss", 3, 2.0)),
        ('{"type":"log","line":"hi"}', events.Log("hi")),
        ("not json\n", events.Log("not json\n")),
        ('{"type":"output","path":"out","step":4}', protocol.Output(Path("out"), 4)),
        ('{"type":"state","path":"st"}', protocol.State(Path("st"), 0)),
        ('{"type":"something else"}', None),
    ],
)
def test_a_trainer_line_reads_as_its_event(line: str, expected: object) -> None:
    assert protocol.read(line) == expected


def test_a_trainer_result_carries_its_evaluation_and_outcome() -> None:
    read = protocol.read(
        '{"type":"result","step":5,"served_step":4,"evaluation":{"best_loss":1.5},'
        '"outcome":{"stop_reason":"completed","downgrades":[]}}'
    )
    assert isinstance(read, events.Result)
    assert (read.step, read.served_step, read.sha256) == (5, 4, "")
    assert read.evaluation == job_pb2.Evaluation(best_loss=1.5)
    assert read.outcome == job_pb2.Outcome(stop_reason="completed")


def test_a_status_that_ends_the_run() -> None:
    ended = {s for s in events.ReportedStatus if events.Status(s).ends_run}
    assert ended == {"cancelled", "failed", "stopped", "done"}
