"""The REST routes of the contract, read from the committed descriptor set's
`google.api.http` rules: what the gateway's REST face is generated from."""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from pathlib import Path

from google.api import annotations_pb2
from google.protobuf import descriptor_pb2

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
                        service=f"{file.package}.{service.name}", method=method, verb=verb.upper(),
                        template=getattr(http, verb), body=http.body,
                        request=messages[method.input_type],
                    )
                )  # fmt: skip
    return tuple(found)
