"""Strict input for job specs: the REST body's JSON walked against the `Job` descriptor
before anything parses it, then each value checked in the order HIP-1333 §3 gives.

No error names a value: an unknown key is named by its path when it is shaped like a
field name (`hyperparameters.colour`: a name, never a value, and never token-shaped),
else reported against its parent object, with the fields the object takes; every message
is a fixed phrase.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from google.api import field_behavior_pb2
from google.protobuf import descriptor, json_format
from google.protobuf.message import Message

from services.core import errors
from trainyard.job.v1 import job_pb2

MAX_STRING = 4096
MAX_LIST = 64
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)
FD = descriptor.FieldDescriptor
M = TypeVar("M", bound=Message)

# Identifier-shaped fields: an allow-list each, so URLs, paths and shell strings cannot pass.
PROJECT = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
LABEL = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MACHINE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")
SUITE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A key shaped like a field name (proto's `snake_case` or JSON's `lowerCamel`), which a
# refusal may name.
FIELD_NAME = re.compile(r"^[a-z][A-Za-z0-9_]{0,63}$")

# Secrets that must never be stored in a spec: known key prefixes, and long unbroken
# high-entropy runs (a dashed UUID is fine: its runs are short).
_TOKEN = re.compile(
    r"(?:^|[^A-Za-z0-9])(?:sk-|sk_live_|rk_live_|ghp_|gho_|ghs_|github_pat_|xox[abpr]-|AKIA|ASIA|AIza|"
    r"ty_|hf_|glpat-|eyJ[A-Za-z0-9_-]{8,}\.)|-----BEGIN"
)
_LONG_RUN = re.compile(r"[A-Za-z0-9+/=_]{32,}")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|\bwww\.|\b(?:file|data|javascript):", re.I)
_PATH = re.compile(r"(?:^|[\s\"'=(])(?:/[\w.@-]+){2,}|\.\./|~/|\\\\|\b[A-Za-z]:\\")
_SHELL = re.compile(r"\$\(|`|\$\{|&&|\|\||;\s*\w|\|\s*(?:sh|bash|zsh|python|perl)\b|>\s*/")


def token_shaped(value: str) -> bool:
    if _TOKEN.search(value):
        return True
    return any(
        any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        for run in _LONG_RUN.findall(value)
    )


def free_text_problem(value: str) -> str | None:
    """Why a free-text value (a system prompt) is refused, as a fixed phrase, or None."""
    if any(ord(c) < 32 and c not in "\n\t" for c in value):
        return "must not hold control characters"
    if _URL.search(value):
        return "must not hold a URL"
    if token_shaped(value):
        return "must not hold a secret or token"
    if _SHELL.search(value):
        return "must not hold shell syntax"
    if _PATH.search(value):
        return "must not hold a file path"
    return None


def check_identifier(field: str, value: str, pattern: re.Pattern[str], what: str) -> None:
    if not pattern.fullmatch(value) or token_shaped(value) or value in (".", ".."):
        raise errors.ValidationError(field, f"must be {what}")


def check_one_of(field: str, value: str, allowed: tuple[str, ...]) -> None:
    """A value of a closed set, refused naming the set (never the value)."""
    if value not in allowed:
        raise errors.ValidationError(
            field, "is not one of the accepted values", metadata={"supported": ",".join(allowed)}
        )


def _output_only(field: FD) -> bool:
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.OUTPUT_ONLY in behaviors


def _walk(value: Any, message: descriptor.Descriptor, path: str, scalars: int = MAX_LIST) -> None:
    """Check JSON `value` against a message type: known keys, JSON types, bounds (a list
    of scalars holds at most `scalars`, a list of objects at most MAX_LIST)."""
    where = path or "body"
    if not isinstance(value, Mapping):
        raise errors.ValidationError(where, "must be a JSON object")
    fields = {f.name: f for f in message.fields}
    for key, item in value.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            raise _unknown(key, path, message)
        name = f"{path}.{key}" if path else key
        if item is None:
            continue
        if _output_only(field):
            raise errors.ValidationError(name, "is output only")
        if field.is_repeated and not (
            field.message_type and field.message_type.GetOptions().map_entry
        ):
            if not isinstance(item, list):
                raise errors.ValidationError(name, "must be a list")
            most = MAX_LIST if field.message_type is not None else scalars
            if len(item) > most:
                raise errors.ValidationError(name, f"must hold at most {most} items")
            for element in item:
                _walk_scalar_or_message(element, field, name, scalars)
        else:
            _walk_scalar_or_message(item, field, name, scalars)


def _unknown(key: object, path: str, message: descriptor.Descriptor) -> errors.ValidationError:
    """An unknown key, named by its path when it is a name, with the fields its object
    takes."""
    supported = {"supported": ",".join(f.name for f in message.fields if not _output_only(f))}
    if isinstance(key, str) and FIELD_NAME.fullmatch(key) and not token_shaped(key):
        name = f"{path}.{key}" if path else key
        return errors.ValidationError(name, "is not a known field", metadata=supported)
    return errors.ValidationError(path or "body", "has an unknown field", metadata=supported)


def _walk_scalar_or_message(value: Any, field: FD, name: str, scalars: int = MAX_LIST) -> None:
    if field.message_type is not None:
        if field.message_type.GetOptions().map_entry:
            if not isinstance(value, Mapping) or len(value) > MAX_LIST:
                raise errors.ValidationError(name, "must be an object of at most 64 entries")
            value_field = field.message_type.fields_by_name["value"]
            for v in value.values():
                _walk_scalar_or_message(v, value_field, name)
            return
        _walk(value, field.message_type, name, scalars)
        return
    kind = field.type
    if kind == FD.TYPE_STRING:
        if not isinstance(value, str):
            raise errors.ValidationError(name, "must be a string")
        if len(value) > MAX_STRING:
            raise errors.ValidationError(name, f"must be at most {MAX_STRING} characters")
    elif kind == FD.TYPE_BOOL:
        if not isinstance(value, bool):
            raise errors.ValidationError(name, "must be true or false")
    elif kind in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise errors.ValidationError(name, "must be a finite number")
    elif kind in (FD.TYPE_INT32, FD.TYPE_INT64):
        lo, hi = _I32 if kind == FD.TYPE_INT32 else _I64
        if isinstance(value, str) and kind == FD.TYPE_INT64 and re.fullmatch(r"-?\d{1,19}", value):
            value = int(value)  # proto JSON writes int64 as a string
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (isinstance(value, float) and not value.is_integer())
            or not lo <= value <= hi
        ):
            raise errors.ValidationError(name, "must be a whole number in range")
    else:
        raise errors.ValidationError(name, "is not accepted")


def parse_json_job(body: Mapping[str, Any]) -> job_pb2.Job:
    """The REST body as a `Job`, refusing unknown fields and output-only ones."""
    _walk(body, job_pb2.Job.DESCRIPTOR, "")  # type: ignore[arg-type]
    job = job_pb2.Job()
    try:
        json_format.ParseDict(dict(body), job, ignore_unknown_fields=False)
    except json_format.ParseError:
        raise errors.ValidationError("body", "does not fit the job's schema") from None
    return job


def parse_strict(body: Mapping[str, Any], into: M, *, scalars: int = MAX_LIST) -> M:
    """A REST body as the message `into`, refusing unknown fields, output-only ones and
    values of the wrong JSON type (lists of scalars up to `scalars` items)."""
    _walk(body, into.DESCRIPTOR, "", scalars)  # type: ignore[arg-type]
    try:
        json_format.ParseDict(dict(body), into, ignore_unknown_fields=False)
    except json_format.ParseError:
        raise errors.ValidationError("body", "does not fit the request's schema") from None
    return into


def check_typed_job(job: job_pb2.Job) -> None:
    """A gRPC client's `Job`: no output-only field may be set."""
    for field, _ in _set_fields(job, ""):
        raise errors.ValidationError(field, "is output only")


def _set_fields(message: Message, path: str) -> list[tuple[str, Message]]:
    found: list[tuple[str, Message]] = []
    for field, value in message.ListFields():
        name = f"{path}.{field.name}" if path else field.name
        if _output_only(field):
            found.append((name, message))
        elif field.message_type is not None and not field.is_repeated:
            found.extend(_set_fields(value, name))
    return found


def read_body(request: M) -> M:
    """A request with its REST body read into it strictly: the gateway binds a REST body
    to the request's `body` (a `google.protobuf.Struct`, as Envoy would drop an unknown
    field of a typed body silently), and this reads it as the request's own fields. An
    unknown key is refused naming it (by path, when it is shaped like a field name), a key
    the path or query already set is refused likewise, and a required field neither sets is
    refused naming it. A gRPC client's typed request, with no body, passes as it is."""
    if not request.HasField("body"):
        return request
    body = json_format.MessageToDict(request.body)  # type: ignore[attr-defined]
    given = {f.name: value for f, value in request.ListFields() if f.name != "body"}
    shape: descriptor.Descriptor = request.DESCRIPTOR  # type: ignore[assignment]
    for key in body:
        if key == "body" or key in given:
            raise _unknown(key, "", shape)
    _known(body, shape, "")
    parsed = type(request)()
    try:
        json_format.ParseDict(body, parsed, ignore_unknown_fields=False)
    except json_format.ParseError:
        raise errors.ValidationError("body", "does not fit the request's schema") from None
    for name in given:
        field = shape.fields_by_name[name]
        if field.is_repeated:
            getattr(parsed, name).extend(getattr(request, name))
        elif field.message_type is not None:
            getattr(parsed, name).CopyFrom(getattr(request, name))
        else:
            setattr(parsed, name, getattr(request, name))
    for field in shape.fields:
        behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        if field_behavior_pb2.REQUIRED in behaviors and field.name not in {*body, *given}:
            raise errors.ValidationError(field.name, "is required")
    return parsed


def _known(value: Any, message: descriptor.Descriptor, path: str) -> None:
    """Every key of a JSON object, at any depth, is a field of its message."""
    if not isinstance(value, Mapping):
        return  # a wrong JSON type is refused by the parse
    fields = message.fields_by_name
    for key, item in value.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            raise _unknown(key, path, message)
        inner = field.message_type
        if inner is None or inner.full_name.startswith("google.protobuf."):
            continue
        name = f"{path}.{key}" if path else key
        if inner.GetOptions().map_entry:
            value_type = inner.fields_by_name["value"].message_type
            if value_type is not None and isinstance(item, Mapping):
                for element in item.values():
                    _known(element, value_type, name)
        elif isinstance(item, list):
            for element in item:
                _known(element, inner, name)
        else:
            _known(item, inner, name)
