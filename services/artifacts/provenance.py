"""Provenance records: the one record each completed job emits, and the validator that
keeps anything but hashes, compact ids and a UTC timestamp out of them.

    python -m services.artifacts.provenance --self-check
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Mapping
from typing import Any

SCHEMA_VERSION = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FIELDS: dict[str, re.Pattern[str] | None] = {
    "id": re.compile(r"^prv_[0-9a-f]{16}$"),
    "job_id": re.compile(r"^job_[0-9a-f]{16}$"),
    "dataset_sha256": _SHA256,
    "artifact_sha256": _SHA256,
    # A compact id: no separators a path, URL or sentence would need.
    "base_model_id": re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$"),
    "base_model_sha256": _SHA256,
    "training_config_sha256": _SHA256,
    "created_at": re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$"),
    "schema_version": None,
}


class ProvenanceError(ValueError):
    """A record the schema refuses; names the field, never the value."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def validate_provenance_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record, unchanged, when it holds exactly the schema's fields in their forms."""
    if not isinstance(record, Mapping):
        raise ProvenanceError("record", "must be an object")
    for key in record:
        if key not in _FIELDS:
            raise ProvenanceError("record", "has an unknown field")
    for field, pattern in _FIELDS.items():
        if field not in record:
            raise ProvenanceError(field, "is missing")
        value = record[field]
        if pattern is None:
            if type(value) is not int or value != SCHEMA_VERSION:
                raise ProvenanceError(field, f"must be {SCHEMA_VERSION}")
            continue
        if not isinstance(value, str) or not pattern.match(value):
            raise ProvenanceError(field, "is not in its form")
    try:
        dt.datetime.fromisoformat(record["created_at"].replace("Z", "+00:00"))
    except ValueError:
        raise ProvenanceError("created_at", "is not a UTC time") from None
    return dict(record)


def utc_now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_GOOD = {
    "id": "prv_0123456789abcdef",
    "job_id": "job_0123456789abcdef",
    "dataset_sha256": "a" * 64,
    "artifact_sha256": "b" * 64,
    "base_model_id": "fixture-tiny-llm",
    "base_model_sha256": "c" * 64,
    "training_config_sha256": "d" * 64,
    "created_at": "2026-11-29T12:00:00Z",
    "schema_version": 1,
}
_BAD: list[tuple[str, dict[str, Any]]] = [
    ("unknown field", {**_GOOD, "notes": "x"}),
    ("missing field", {k: v for k, v in _GOOD.items() if k != "artifact_sha256"}),
    ("path-like id", {**_GOOD, "base_model_id": "/models/llama"}),
    ("relative path", {**_GOOD, "base_model_id": "../weights"}),
    ("URL-like id", {**_GOOD, "base_model_id": "https://hub.example/model"}),
    ("free text with whitespace", {**_GOOD, "base_model_id": "my favourite model"}),
    ("a prompt", {**_GOOD, "training_config_sha256": "You are a helpful assistant."}),
    ("token-shaped hash", {**_GOOD, "dataset_sha256": "ghp_" + "A" * 36}),
    ("upper-case hash", {**_GOOD, "artifact_sha256": "B" * 64}),
    ("local time", {**_GOOD, "created_at": "2026-11-29T12:00:00+02:00"}),
    ("impossible date", {**_GOOD, "created_at": "2026-13-45T12:00:00Z"}),
    ("schema version", {**_GOOD, "schema_version": 2}),
    ("boolean version", {**_GOOD, "schema_version": True}),
]


def self_check() -> int:
    failures = 0
    try:
        validate_provenance_record(_GOOD)
        print("ok    a well-formed record is accepted")
    except ProvenanceError as exc:
        print(f"FAIL  a well-formed record was refused ({exc})")
        failures += 1
    for name, record in _BAD:
        try:
            validate_provenance_record(record)
        except ProvenanceError:
            print(f"ok    refused: {name}")
        else:
            print(f"FAIL  accepted: {name}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--self-check"]:
        print("usage: python -m services.artifacts.provenance --self-check", file=sys.stderr)
        sys.exit(2)
    sys.exit(self_check())
