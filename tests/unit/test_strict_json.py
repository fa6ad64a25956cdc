"""The REST face's strict reading of a request body (gateway/rest.lua) run in LuaJIT, as Envoy
runs it: RFC 8259 JSON only, a key once per object, and the first fault's position."""

from __future__ import annotations

import json
from typing import Any

import lupa.luajit21 as luajit
import pytest

from gateway import render


@pytest.fixture(scope="module")
def lua() -> Any:
    runtime = luajit.LuaRuntime()
    runtime.execute(render._lua())
    return runtime.globals()


def fault(lua: Any, text: str) -> tuple[int, str] | None:
    """The first fault's byte offset (from 0) and words, or None when the body is admitted."""
    found = lua.json_fault(text)
    return None if found is None else (found.at - 1, found.why)


@pytest.mark.parametrize(
    ("text", "offset", "words"),
    [
        ('{"a": 1,}', 8, "a trailing comma is not JSON"),
        ("[1, 2,]", 6, "a trailing comma is not JSON"),
        ("{'a': 1}", 1, "strings and keys take double quotes, not single ones"),
        ("{\"a\": 'x'}", 6, "strings and keys take double quotes, not single ones"),
        ('{"a": 1', 7, "the body ends before its value does"),
        ('{"a": NaN}', 6, "NaN and Infinity are not JSON numbers"),
        ('{"a": -Infinity}', 7, "NaN and Infinity are not JSON numbers"),
        ('{"a": 1 // one\n}', 8, "a comma or the end of the object must follow a value"),
        ('/* c */ {"a": 1}', 0, "comments are not JSON"),
        ('{"a": 1, "a": 2}', 9, "a key appears twice in one object"),
        ('{"a": 1, "\\u0061": 2}', 9, "a key appears twice in one object"),
        ("{a: 1}", 1, "a key must be a string in double quotes"),
        ('{"a": 01}', 7, "a comma or the end of the object must follow a value"),
        ('{"a": 1.}', 8, "a number's fraction needs a digit"),
        ('{"a": "\\x"}', 7, "an escape that JSON does not have"),
        ('{"a": "\t"}', 7, "a control character in a string must be escaped"),
        ('{"a": 1} x', 9, "text follows the body's value"),
        ('{"a" 1}', 5, "a colon must follow a key"),
        ("[" * 65 + "]" * 65, 64, "the body nests deeper than 64 levels"),
    ],
)
def test_a_body_that_is_not_strict_json_is_refused_at_its_first_fault(
    lua: Any, text: str, offset: int, words: str
) -> None:
    assert fault(lua, text) == (offset, words)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  \n",
        "{}",
        '{"a": [1, -2.5e+3, 0, true, false, null, "x\\"y\\u00e9\\n"], "b": {"c": {}}}',
        '\n {"name": "ö", "n": 1E2, "e": []}\r\n',
        '"just a string"',
    ],
)
def test_strict_json_is_admitted(lua: Any, text: str) -> None:
    assert fault(lua, text) is None
    if text.strip():
        json.loads(text)


def test_the_refusal_names_the_fault_and_its_line_and_column(lua: Any) -> None:
    refusal = json.loads(lua.body_refusal('{\n  "a": 1,\n  "b": 2,\n}'))
    assert refusal == {
        "type": "https://trainyard.dev/problems/malformed-json",
        "title": "Malformed JSON",
        "status": 400,
        "code": "malformed_json",
        "detail": "The request body is not JSON (RFC 8259): a trailing comma is not JSON, "
        "at line 4, column 1.",
        "metadata": {"line": "4", "column": "1", "offset": "22"},
    }
    assert lua.body_refusal('{"a": 1}') is None


def _strict_python(text: str) -> bool:
    """Whether Python's reader, held to RFC 8259 and keys once, admits `text`."""

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a key twice")
        return dict(pairs)

    def constant(_: str) -> None:
        raise ValueError("NaN or Infinity")

    try:
        json.loads(text, object_pairs_hook=once, parse_constant=constant)
    except ValueError:
        return False
    return True


def test_the_scanner_admits_exactly_what_a_strict_reader_does(lua: Any) -> None:
    body = '{"base": "m", "steps": [1, 2.5, -3e2], "ok": true, "none": null, "s": "a\\"b"}'
    alphabet = "{}[],:\"'/\\ 0-.eEaNI\ttruefalsenull"
    cases = {body}
    for i in range(len(body) + 1):
        cases.add(body[:i] + body[i + 1 :])
        for c in alphabet:
            cases.add(body[:i] + c + body[i:])
    for text in sorted(cases):
        assert (fault(lua, text) is None) == _strict_python(text), text
