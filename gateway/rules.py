"""The REST routes of the contract, read from the committed descriptor set's
`google.api.http` rules: what the gateway's REST face is generated from."""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from pathlib import Path
from typing import TypedDict

from google.api import annotations_pb2
from google.protobuf import descriptor_pb2

from trainyard.rest import NULLABLE

DESCRIPTOR = Path(__file__).parent / "trainyard.binpb"
VERBS = ("get", "put", "post", "delete", "patch")
_F = descriptor_pb2.FieldDescriptorProto
# How a query parameter's value must read, by the field's type.
_QUERY_KINDS = {
    _F.TYPE_INT32: "int", _F.TYPE_INT64: "int", _F.TYPE_SINT32: "int", _F.TYPE_SINT64: "int",
    _F.TYPE_SFIXED32: "int", _F.TYPE_SFIXED64: "int", _F.TYPE_UINT32: "uint",
    _F.TYPE_UINT64: "uint", _F.TYPE_FIXED32: "uint", _F.TYPE_FIXED64: "uint",
    _F.TYPE_BOOL: "bool", _F.TYPE_STRING: "string", _F.TYPE_ENUM: "string",
    _F.TYPE_DOUBLE: "number", _F.TYPE_FLOAT: "number",
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Rule:
    """One REST route: a method of a service under a verb and a path template."""

    service: str  # the full name, `trainyard.job.v1.JobService`
    method: descriptor_pb2.MethodDescriptorProto
    verb: str  # upper case
    template: str  # `/v1/train/jobs/{id}`
    body: str  # "" (no body), "*" (the whole request) or one field's name
    request: descriptor_pb2.DescriptorProto

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{([^}=]+)", self.template)

    def query_params(self) -> dict[str, str]:
        """The request's fields a query may set (none when the body takes them all), by
        the kind of value each takes."""
        if self.body == "*":
            return {}
        taken = {*self.path_params, self.body}
        return {
            f.name: _QUERY_KINDS[f.type]
            for f in self.request.field
            if f.name not in taken and f.type in _QUERY_KINDS
        }

    def _pieces(self) -> list[str]:
        return re.split(r"({[^}]+})", self.template)

    @property
    def pattern(self) -> str:
        """The path template as a Lua pattern: a variable is one segment."""
        return (
            "^"
            + "".join(
                "[^/]+" if piece.startswith("{") else re.sub(r"([().%+\-*?\[\]^$])", r"%\1", piece)
                for piece in self._pieces()
            )
            + "$"
        )

    @property
    def regex(self) -> re.Pattern[str]:
        """The path template as a regular expression: a variable is one segment."""
        return re.compile(
            "".join(
                "[^/]+" if piece.startswith("{") else re.escape(piece) for piece in self._pieces()
            )
        )


@cache
def rules(path: Path = DESCRIPTOR) -> tuple[Rule, ...]:
    files = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file
    messages = {
        f".{f.package}.{m.name}": m for f in files for m in f.message_type
    }  # top-level messages: every request is one
    found = []
    for file in files:
        if not file.package.startswith("trainyard."):
            continue
        for service in file.service:
            for method in service.method:
                http = method.options.Extensions[annotations_pb2.http]
                verb = http.WhichOneof("pattern")
                if verb not in VERBS:
                    continue
                found.append(
                    Rule(
                        service=f"{file.package}.{service.name}",
                        method=method,
                        verb=verb.upper(),
                        template=getattr(http, verb),
                        body=http.body,
                        request=messages[method.input_type],
                    )
                )
    return tuple(found)


# The 64-bit integer types, which proto JSON writes as strings.
_WIDE = {_F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_SINT64, _F.TYPE_FIXED64, _F.TYPE_SFIXED64}
# Messages proto JSON writes as something else than an object of their fields; never walked.
_OPAQUE = "google."
INT = "int"


class Shape(TypedDict):
    fields: dict[str, object]
    nulls: list[str]


@cache
def shapes(path: Path = DESCRIPTOR) -> dict[str, Shape]:
    """What the REST face rewrites in the JSON answer of each message of the contract:
    `nulls`, its fields of `NULLABLE`, which read `null` when unset; `fields`, the fields to
    rewrite or walk into, each naming `int` (a 64-bit integer, written as a number), a
    message, or `{"map": <the value's kind>}`. A message with nothing to rewrite, however
    deep, is left out."""
    files = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}

    def collect(prefix: str, found: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in found:
            messages[f"{prefix}.{message.name}"] = message
            collect(f"{prefix}.{message.name}", list(message.nested_type))

    for file in files:
        collect(f".{file.package}", list(file.message_type))

    def kind(field: descriptor_pb2.FieldDescriptorProto) -> object:
        if field.type in _WIDE:
            return INT
        if field.type != _F.TYPE_MESSAGE or field.type_name.startswith(f".{_OPAQUE}"):
            return None
        entry = messages[field.type_name]
        if entry.options.map_entry:
            value = kind(entry.field[1])
            return {"map": value} if value is not None else None
        return field.type_name[1:]

    raw: dict[str, Shape] = {}
    for name, message in messages.items():
        if message.options.map_entry or name.startswith(f".{_OPAQUE}"):
            continue
        nulls = [f.name for f in message.field if f.name in NULLABLE.get(name[1:], ())]
        walk = {f.name: k for f in message.field if (k := kind(f)) is not None}
        raw[name[1:]] = {"fields": walk, "nulls": nulls}
    return _pruned(raw)


def _target(k: object) -> str | None:
    """The message a field's kind walks into, if any."""
    while isinstance(k, dict):
        k = k["map"]
    return k if isinstance(k, str) and k != INT else None


def _pruned(raw: dict[str, Shape]) -> dict[str, Shape]:
    """`raw` kept to the messages with something to rewrite, however deep."""
    # A message matters when it has a null or an int, or holds one that matters.
    matters = {n for n in raw if raw[n]["nulls"] or INT in _leaves(raw[n])}
    grew = True
    while grew:
        grew = False
        for n in set(raw) - matters:
            if any(_target(k) in matters for k in raw[n]["fields"].values()):
                matters.add(n)
                grew = True
    out: dict[str, Shape] = {}
    for n in sorted(matters):
        fields = raw[n]["fields"]
        kept = {f: k for f, k in fields.items() if _target(k) in matters or _target(k) is None}
        out[n] = {"fields": kept, "nulls": raw[n]["nulls"]}
    return out


def _leaves(shape: Shape) -> set[object]:
    out: set[object] = set()
    for k in shape["fields"].values():
        while isinstance(k, dict):
            k = k["map"]
        out.add(k)
    return out
