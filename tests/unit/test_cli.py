"""The CLI as a user meets it with no stack running: it names the URL it tried and how to
start one, and exits with the code `--help` documents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainyard.cli_base import exact_dollars
from trainyard.ports import free_port


def test_an_unreachable_gateway_is_named_with_how_to_start_the_stack() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "trainyard.cli", "--url", url, "models"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4
    assert url in done.stderr and "make up" in done.stderr
    assert "failed to connect" not in done.stderr  # no raw gRPC text


def test_help_documents_the_exit_codes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainyard.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "4 no gateway answered" in " ".join(done.stdout.split())
    assert "TRAINYARD_URL" in done.stdout


def test_admin_commands_refuse_a_home_with_no_stack(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Run away from the stack's home, `admin create-key` would make a store of its own
    and print a key the stack rejects: it refuses and makes nothing."""
    env = {**os.environ, "TRAINYARD_HOME": str(tmp_path / "elsewhere")}
    env.pop("TRAINYARD_DATABASE_URL", None)
    for argv in (
        ["create-key", "--org", "acme", "--role", "member"],
        ["credit", "--org", "acme", "--amount", "5", "--name", "inv-1"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "trainyard.cli", "admin", *argv],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "no Trainyard store here" in done.stderr and "make up" in done.stderr
        assert not done.stdout  # no key printed
    assert list(tmp_path.iterdir()) == []


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    url = f"http://127.0.0.1:{free_port()}"  # nothing answers: these never reach a gateway
    return subprocess.run(
        [sys.executable, "-m", "trainyard.cli", "--url", url, *args],
        capture_output=True, text=True, timeout=60, cwd=cwd,
    )  # fmt: skip


def test_create_help_documents_the_spec_file_and_where_it_is_sent() -> None:
    shown = " ".join(run("jobs", "create", "--help").stdout.split())
    for needed in ("POST /v1/train/jobs", "README", "base_model", "dataset.uri",
                   "resources.budget", "TRAINYARD_URL", "TRAINYARD_API_KEY"):  # fmt: skip
        assert needed in shown, needed
    assert "environment variable" in " ".join(run("--help").stdout.split())


def test_download_help_names_the_directory_it_unpacks_into() -> None:
    shown = " ".join(run("jobs", "download", "--help").stdout.split())
    assert "./JOB_ID" in shown and "RESULT_UNAVAILABLE" in shown


def test_a_spec_file_that_is_not_json_is_a_usage_error_naming_where(tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text('{"base_model": "secret-value",\n oops}')
    for command in ("create", "estimate"):
        done = run("jobs", command, "-f", str(spec))
        assert done.returncode == 2, done.stderr
        assert "is not JSON at line 2 column 2" in done.stderr
        assert "Traceback" not in done.stderr and "secret-value" not in done.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [('{"budget": NaN}', "NaN and Infinity"), ('{"a": 1, "a": 2}', "a key appears twice")],
)
def test_a_spec_file_of_what_rfc_8259_refuses_is_a_usage_error(
    tmp_path: Path, text: str, words: str
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(text)
    done = run("jobs", "create", "-f", str(spec))
    assert done.returncode == 2 and f"is not JSON: {words}" in done.stderr, done.stderr


def test_download_refuses_a_directory_that_holds_something(tmp_path: Path) -> None:
    (tmp_path / "job_1").mkdir()
    (tmp_path / "job_1" / "kept.txt").write_text("mine")
    done = run("jobs", "download", "job_1", cwd=tmp_path)
    assert done.returncode == 2 and "job_1 exists and is not empty" in done.stderr
    assert (tmp_path / "job_1" / "kept.txt").read_text() == "mine"


def test_the_cli_prints_amounts_and_counters_as_numbers_as_the_rest_face_does() -> None:
    from google.protobuf import json_format

    from trainyard.cli_base import numbers
    from trainyard.meter.v1 import meter_pb2

    wallet = meter_pb2.Wallet(payer="12", balance_micro_cents=2**40, spend_cap_micro_cents=-1)
    wallet.holds.add(job_id="7", rate_micro_cents=8_000_000)
    printed = numbers(wallet, json_format.MessageToDict(wallet, preserving_proto_field_name=True))
    assert printed["balance_micro_cents"] == 2**40 and printed["spend_cap_micro_cents"] == -1
    assert printed["holds"] == [{"job_id": "7", "rate_micro_cents": 8_000_000}]
    assert printed["payer"] == "12"


def test_an_exact_amount_keeps_a_sub_cent_amount_to_its_last_micro_cent() -> None:
    assert [exact_dollars(m) for m in (-4167, 90_000, 10**8, 177_871_234, -(10**13) - 1)] == [
        "-$0.00004167",
        "$0.0009",
        "$1.0000",
        "$1.77871234",
        "-$100,000.00000001",
    ]
