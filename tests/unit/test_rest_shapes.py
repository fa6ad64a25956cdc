"""The REST face's answer rewrite (gateway/rest.lua) run in LuaJIT, as Envoy runs it, with the
tables gateway/render.py generates: 64-bit integers read as JSON numbers, the contract's
`null`s are present, and nothing else changes."""

from __future__ import annotations

import json
from typing import Any

import lupa.luajit21 as luajit
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from gateway import render, rules
from trainyard.job.v1 import job_pb2, job_service_pb2
from trainyard.meter.v1 import meter_pb2


@pytest.fixture(scope="module")
def lua() -> Any:
    runtime = luajit.LuaRuntime()
    runtime.execute(render._lua())
    return runtime.globals()


def transcoded(message: Message) -> str:
    """`message` as Envoy's transcoder prints it (envoy.yaml.tmpl's print options)."""
    return json.dumps(
        json_format.MessageToDict(
            message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        ),
        separators=(",", ":"),
    )


def answered(lua: Any, message: Message) -> Any:
    text = lua.reshape(transcoded(message), message.DESCRIPTOR.full_name)
    assert text is not None
    return json.loads(text)


def test_a_jobs_money_reads_as_numbers_and_its_absent_blocks_as_null(lua: Any) -> None:
    job = job_pb2.Job(
        id="123", project="456", cost_micro_cents=2**63 - 1, cost_credits=12.5, base_model="789"
    )
    job.resources.budget = 100
    job.resources.max_seconds = 3600
    job.resources.machines.extend(["42"])
    job.holding.micro_cents = 7
    read = answered(lua, job)
    # Exact digits, past 2^53 too; strings that look like numbers stay strings.
    assert read["cost_micro_cents"] == 2**63 - 1 and read["cost_credits"] == 12.5
    assert read["resources"]["budget"] == 100 and read["resources"]["max_seconds"] == 3600
    assert read["holding"]["micro_cents"] == 7
    assert (read["id"], read["project"], read["base_model"]) == ("123", "456", "789")
    assert read["resources"]["machines"] == ["42"]
    assert (read["evaluation"], read["outcome"], read["preparation"]) == (None, None, None)
    assert read["queue"] is None  # a job that waits for no executor
    # Everything else is as the transcoder wrote it.
    plain = json.loads(transcoded(job))
    changed = {
        "cost_micro_cents",
        "resources",
        "holding",
        "evaluation",
        "outcome",
        "preparation",
        "queue",
    }
    assert {k: v for k, v in read.items() if k not in changed} == {
        k: v for k, v in plain.items() if k not in changed
    }


def test_a_block_that_is_set_is_kept_and_a_list_rewrites_each_job(lua: Any) -> None:
    done = job_pb2.Job(id="a", cost_micro_cents=5)
    done.evaluation.best_loss = 1.5
    done.outcome.stop_reason = "max_steps"
    listed = answered(
        lua, job_service_pb2.ListJobsResponse(jobs=[done, job_pb2.Job(id="b")], total_size=2)
    )
    first, second = listed["jobs"]
    assert (
        first["evaluation"]["best_loss"] == 1.5 and first["outcome"]["stop_reason"] == "max_steps"
    )
    assert first["preparation"] is None and first["cost_micro_cents"] == 5
    assert second["evaluation"] is None and second["cost_micro_cents"] == 0
    assert listed["total_size"] == 2


def test_a_search_without_a_count_reads_total_null(lua: Any) -> None:
    searched = answered(lua, job_service_pb2.ListJobDatasetItemsResponse(search_applied=True))
    assert searched["total"] is None
    counted = answered(lua, job_service_pb2.ListJobDatasetItemsResponse(total=0))
    assert counted["total"] == 0


def test_a_wallet_reads_every_amount_as_a_number(lua: Any) -> None:
    wallet = meter_pb2.Wallet(balance_micro_cents=-3, spend_cap_micro_cents=10**12)
    wallet.holds.add(rate_micro_cents=8_000_000, charged_micro_cents=1)
    wallet.project_caps.add(micro_cents=4, spent_micro_cents=2)
    read = answered(lua, wallet)
    assert (read["balance_micro_cents"], read["spend_cap_micro_cents"]) == (-3, 10**12)
    assert read["holds"][0]["rate_micro_cents"] == 8_000_000
    assert read["project_caps"][0] == {**read["project_caps"][0], "micro_cents": 4}
    assert read["project_caps"][0]["spent_micro_cents"] == 2


def test_text_that_is_not_json_is_left_as_it_was(lua: Any) -> None:
    for text in ('{"cost_micro_cents":"1"', '{"a":1} x', "", '{"a":"\\'):
        assert lua.reshape(text, "trainyard.job.v1.Job") is None
    # Escapes and nesting the shape does not name pass through untouched.
    text = '{"name":"a\\"b\\\\","chats":[{"x":["1",{"y":"2"}]}],"cost_micro_cents":"9"}'
    assert json.loads(lua.reshape(text, "trainyard.job.v1.Job")) == {
        "name": 'a"b\\', "chats": [{"x": ["1", {"y": "2"}]}], "cost_micro_cents": 9,
        "evaluation": None, "outcome": None, "preparation": None, "queue": None,
    }  # fmt: skip


def test_every_64_bit_integer_a_rest_answer_carries_is_rewritten() -> None:
    shapes = rules.shapes()
    ints = {
        (name, f)
        for name, shape in shapes.items()
        for f, k in shape["fields"].items()
        if k == rules.INT
    }
    assert {
        ("trainyard.job.v1.Job", "cost_micro_cents"),
        ("trainyard.job.v1.Resources", "budget"),
        ("trainyard.job.v1.Resources", "max_seconds"),
        ("trainyard.job.v1.Holding", "micro_cents"),
        ("trainyard.job.v1.Price", "micro_cents"),
        ("trainyard.meter.v1.Rate", "micro_cents"),
        ("trainyard.meter.v1.Wallet", "balance_micro_cents"),
        ("trainyard.meter.v1.LedgerEntry", "micro_cents"),
        ("trainyard.meter.v1.SpendCap", "micro_cents"),
        ("trainyard.client.v1.TrainingClient", "cost_micro_cents"),
    } <= ints
    # Each nullable field the table names exists, so a rename cannot drop a `null` silently.
    for name, fields in rules.NULLABLE.items():
        assert set(fields) == set(shapes[name]["nulls"])


def test_a_stream_is_rewritten_line_by_line_and_never_held_back(lua: Any) -> None:
    routes = render._lua()
    watch = next(line for line in routes.splitlines() if "/watch$" in line)
    assert 'GET = "stream:trainyard.job.v1.WatchJobResponse"' in watch
    first = transcoded(job_service_pb2.WatchJobResponse(job=job_pb2.Job(cost_micro_cents=5)))
    caught = transcoded(job_service_pb2.WatchJobResponse(caught_up=True))
    lines = lua.reshape_lines(f"{first}\n{caught}\n", "trainyard.job.v1.WatchJobResponse")
    one, two = (json.loads(line) for line in lines.splitlines())
    assert one["job"]["cost_micro_cents"] == 5 and one["job"]["evaluation"] is None
    assert two == json.loads(caught)
    # A chunk that does not end a line is passed on as it came.
    assert lua.reshape_lines(first[:-3], "trainyard.job.v1.WatchJobResponse") is None
