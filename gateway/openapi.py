"""The REST surface as an OpenAPI 3.1 document, generated from the committed descriptor set:
every `google.api.http` rule of every `trainyard.*` service is an operation, every message
it reaches a schema (proto3 JSON with proto field names, as Envoy prints them), and every
refusal the status table (`trainyard.rest`) gives it a response.

`make gen` writes `gateway/openapi.json` and `make check-gen` fails while it is stale
(`infra/gen-protos.sh`); the gateway serves the file at `GET /v1/train/openapi.json`.

    python -m gateway.openapi [--check] [--descriptor PATH] [--output PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import http
import importlib.metadata
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from google.api import annotations_pb2, field_behavior_pb2, http_pb2
from google.protobuf import descriptor_pb2

from gateway.rules import NULLABLE
from trainyard import rest

HERE = Path(__file__).parent
DESCRIPTOR = HERE / "trainyard.binpb"
OUTPUT = HERE / "openapi.json"
PYPROJECT = HERE.parent / "pyproject.toml"
# Where the gateway serves this document (a route of its own, not an RPC).
DOCUMENT_PATH = "/v1/train/openapi.json"
VERBS = ("get", "put", "post", "delete", "patch")

Schema = dict[str, Any]
_F = descriptor_pb2.FieldDescriptorProto
_INT32 = {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
_UINT32 = {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 2**32 - 1}
_INT64 = {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1}
_UINT64 = {"type": "integer", "format": "uint64", "minimum": 0, "maximum": 2**64 - 1}
# proto3 JSON prints 64-bit integers as decimal strings; the REST face rewrites each to a
# JSON number (gateway/rest.lua), and reads a number too. Only a wrapper stays a string.
_INT64_STRING = {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"}
_UINT64_STRING = {"type": "string", "format": "uint64", "pattern": "^[0-9]+$"}
_INT64_JSON = _INT64
_UINT64_JSON = _UINT64
_WIDE = {_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64, _F.TYPE_UINT64, _F.TYPE_FIXED64}
_EXACT = (
    "A JSON number: its digits are exact, and a reader that holds numbers as doubles reads "
    "it exactly below 2^53."
)
_DOUBLE = {"type": "number", "format": "double"}
_FLOAT = {"type": "number", "format": "float"}
_BOOL = {"type": "boolean"}
_STRING = {"type": "string"}
_BYTES = {"type": "string", "format": "byte", "contentEncoding": "base64"}
# Scalars in a JSON body, by proto3's JSON mapping.
_JSON_SCALARS: dict[int, Schema] = {
    _F.TYPE_INT32: _INT32, _F.TYPE_SINT32: _INT32, _F.TYPE_SFIXED32: _INT32,
    _F.TYPE_UINT32: _UINT32, _F.TYPE_FIXED32: _UINT32,
    _F.TYPE_INT64: _INT64_JSON, _F.TYPE_SINT64: _INT64_JSON, _F.TYPE_SFIXED64: _INT64_JSON,
    _F.TYPE_UINT64: _UINT64_JSON, _F.TYPE_FIXED64: _UINT64_JSON,
    _F.TYPE_DOUBLE: _DOUBLE, _F.TYPE_FLOAT: _FLOAT, _F.TYPE_BOOL: _BOOL,
    _F.TYPE_STRING: _STRING, _F.TYPE_BYTES: _BYTES,
}  # fmt: skip
# Scalars in a path or a query, where every value is text: a 64-bit integer is a number.
_TEXT_SCALARS: dict[int, Schema] = {
    **_JSON_SCALARS,
    _F.TYPE_INT64: _INT64, _F.TYPE_SINT64: _INT64, _F.TYPE_SFIXED64: _INT64,
    _F.TYPE_UINT64: _UINT64, _F.TYPE_FIXED64: _UINT64,
}  # fmt: skip
_WRAPPERS: dict[str, Schema] = {
    "DoubleValue": _DOUBLE, "FloatValue": _FLOAT, "Int64Value": _INT64_STRING,
    "UInt64Value": _UINT64_STRING, "Int32Value": _INT32, "UInt32Value": _UINT32,
    "BoolValue": _BOOL, "StringValue": _STRING, "BytesValue": _BYTES,
}  # fmt: skip
# Well-known types print as proto3's JSON mapping says, not as their fields.
_WELL_KNOWN: dict[str, Schema] = {
    ".google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    ".google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]{1,9})?s$"},
    ".google.protobuf.Struct": {"type": "object"},
    ".google.protobuf.Value": {},
    ".google.protobuf.ListValue": {"type": "array"},
    ".google.protobuf.NullValue": {"type": "null"},
    ".google.protobuf.Empty": {"type": "object"},
    ".google.protobuf.FieldMask": {"type": "string"},
    ".google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "required": ["@type"],
    },
    **{f".google.protobuf.{name}": schema for name, schema in _WRAPPERS.items()},
}
_HTTP_BODY = ".google.api.HttpBody"

# Refusals every operation can meet: the gateway's own (a query or route it cannot map, a
# method the path does not take, a service that is down) and every service's (the key, the
# role, the org's resource, a concurrent writer, a failure inside).
COMMON_REASONS = (
    "INVALID_REQUEST", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND",
    "METHOD_NOT_ALLOWED", "CONFLICT", "INTERNAL_ERROR", "UNAVAILABLE", "RATE_LIMITED",
)  # fmt: skip
# Only where there is a body to parse.
BODY_REASONS = ("MALFORMED_JSON",)
# Envoy answers a body over its limit itself: 413 `PAYLOAD_TOO_LARGE` (gateway/render.py).
TOO_LARGE = 413
_SHAPE = (
    "UNSUPPORTED_BASE", "UNSUPPORTED_ADAPTATION", "UNSUPPORTED_OBJECTIVE", "UNSUPPORTED_PROTECT",
    "UNSUPPORTED_OUTPUT", "UNSUPPORTED_DEVICE", "UNSUPPORTED_EVALUATION",
    "INCOMPATIBLE_ADAPTERS", "INCOMPATIBLE_BASIS", "BUDGET_REQUIRED",
)  # fmt: skip
_DATASET = (
    "TRAINING_DATASET_SELECTION_INVALID",
    "TRAINING_DATASET_EMPTY",
    "TRAINING_DATASET_UNUSABLE",
    "TRAINING_DATASET_CONFLICT",
)
_MONEY = tuple(sorted(rest.MONEY))
# The reasons a method meets beyond the common ones that its proto comment does not name in
# backticks (those are read from the descriptor and added): HIP-1333 §3's create order, §6
# and §10's grants, §5's leases.
REASONS: Mapping[str, tuple[str, ...]] = {
    "trainyard.job.v1.JobService.CreateJob": (
        *_SHAPE, *_DATASET, *_MONEY, "TRAINING_DURATION_EXCEEDS_LIMIT", "JOB_LIMIT",
        "IDEMPOTENCY_KEY_REUSED",
    ),
    # An empty or unusable selection is answered (`is_trainable: false`), not refused.
    "trainyard.job.v1.JobService.EstimateJob": (
        *_SHAPE, "TRAINING_DATASET_SELECTION_INVALID", "TRAINING_DATASET_CONFLICT",
    ),
    "trainyard.job.v1.JobService.RetryJob": (
        "IDEMPOTENCY_KEY_REUSED", "INVALID_TRANSITION", "CHECKPOINT_UNAVAILABLE",
        "TRAINING_DURATION_EXCEEDS_LIMIT", "JOB_LIMIT",
    ),
    "trainyard.job.v1.JobService.CancelJob": ("TRAINING_JOB_NOT_IN_TRAINING",),
    "trainyard.job.v1.JobService.PublishJob": ("INVALID_TRANSITION", "ROUTE_CONFLICT"),
    "trainyard.artifact.v1.ArtifactService.CreateArtifact": ("PENDING_LIMIT", *_MONEY),
    "trainyard.artifact.v1.ArtifactService.ConfirmArtifact": (
        "ARTIFACT_MISMATCH", "ARTIFACT_NOT_UPLOADED",
    ),
    "trainyard.artifact.v1.ArtifactService.DeleteJobArtifact": ("PUBLISHED", "IN_USE"),
    "trainyard.claim.v1.ClaimService.ReportTask": ("LEASE_LOST",),
    "trainyard.claim.v1.ClaimService.RegisterTaskArtifact": ("LEASE_LOST", "PENDING_LIMIT", *_MONEY),
    "trainyard.claim.v1.ClaimService.ReadTaskInput": ("LEASE_LOST",),
    "trainyard.client.v1.ClientService.CreateTrainingClient": (
        "UNSUPPORTED_BASE", "UNSUPPORTED_ADAPTATION", "UNSUPPORTED_PROTECT", "ENGINE_FULL",
        "TRAINING_UNAVAILABLE", *_MONEY,
    ),
    **{
        f"trainyard.client.v1.ClientService.{method}": (
            "CLIENT_GONE", "IDEMPOTENCY_KEY_REUSED", "INSUFFICIENT_BALANCE", "SPEND_CAP_EXCEEDED",
            "DEADLINE_EXCEEDED",
        )
        for method in (
            "RunForwardBackward", "RunOptimStep", "SampleTrainingClient", "SaveTrainingClientWeights",
        )
    },
}  # fmt: skip
# Whole services whose every method meets a reason.
SERVICE_REASONS: Mapping[str, tuple[str, ...]] = {}
# The method whose refusals take the status a retry meets (`rest.AT_RETRY`), as
# services/core/rpc.py renders them.
RETRY = "trainyard.job.v1.JobService.RetryJob"
# Methods whose empty answer the gateway turns into `204` with no body (gateway/rest.lua).
NO_CONTENT = frozenset({"trainyard.claim.v1.ClaimService.ClaimTask"})
# Methods that answer `202` with a future when the call has not ended in time.
ACCEPTED = frozenset(
    f"trainyard.client.v1.ClientService.{method}"
    for method in (
        "RunForwardBackward", "RunOptimStep", "SampleTrainingClient", "SaveTrainingClientWeights",
        "GetFuture",
    )
)  # fmt: skip
# RFC 9110's names, fixed here: Python's `http.HTTPStatus` renames some between versions.
_PHRASES = {
    400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large",
    422: "Unprocessable Content", 429: "Too Many Requests", 500: "Internal Server Error",
    501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout",
}  # fmt: skip
_BACKTICKED = re.compile(r"`([A-Z][A-Z0-9_]+)`")
_HEADER = re.compile(r"`([A-Za-z][A-Za-z0-9-]*)`\s+header")


def _phrase(status: int) -> str:
    return _PHRASES.get(status) or http.HTTPStatus(status).phrase


def _comment(text: str) -> str:
    lines = [line[1:] if line.startswith(" ") else line for line in text.splitlines()]
    return "\n".join(line.rstrip() for line in lines).strip()


def _summary(comment: str) -> str:
    first = comment.split("\n\n", 1)[0].replace("\n", " ")
    match = re.match(r"(.+?[.;:])(\s|$)", first)
    return (match.group(1) if match else first).rstrip(";:")


@dataclasses.dataclass(frozen=True)
class _Message:
    proto: descriptor_pb2.DescriptorProto
    comment: str
    fields: Mapping[str, str]  # field name → its comment
    oneofs: Mapping[int, str]  # oneof index → name, synthetic (`optional`) ones left out


@dataclasses.dataclass(frozen=True)
class _Enum:
    proto: descriptor_pb2.EnumDescriptorProto
    comment: str
    values: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class _Method:
    service: descriptor_pb2.ServiceDescriptorProto
    package: str
    proto: descriptor_pb2.MethodDescriptorProto
    comment: str
    service_comment: str

    @property
    def full_name(self) -> str:
        return f"{self.package}.{self.service.name}.{self.proto.name}"


class _Descriptors:
    """The set's messages, enums and methods by full name, each with its leading comment."""

    def __init__(self, files: Iterable[descriptor_pb2.FileDescriptorProto]) -> None:
        self.messages: dict[str, _Message] = {}
        self.enums: dict[str, _Enum] = {}
        self.methods: list[_Method] = []
        for file in files:
            comments = {
                tuple(loc.path): _comment(loc.leading_comments)
                for loc in file.source_code_info.location
                if loc.leading_comments
            }
            prefix = f".{file.package}" if file.package else ""
            for i, message in enumerate(file.message_type):
                self._message(message, prefix, (4, i), comments)
            for i, enum in enumerate(file.enum_type):
                self._enum(enum, prefix, (5, i), comments)
            if not file.package.startswith("trainyard."):
                continue
            for i, service in enumerate(file.service):
                for j, method in enumerate(service.method):
                    self.methods.append(
                        _Method(
                            service=service,
                            package=file.package,
                            proto=method,
                            comment=comments.get((6, i, 2, j), ""),
                            service_comment=comments.get((6, i), ""),
                        )
                    )

    def _message(
        self,
        message: descriptor_pb2.DescriptorProto,
        prefix: str,
        path: tuple[int, ...],
        comments: Mapping[tuple[int, ...], str],
    ) -> None:
        name = f"{prefix}.{message.name}"
        synthetic = {f.oneof_index for f in message.field if f.proto3_optional}
        self.messages[name] = _Message(
            proto=message,
            comment=comments.get(path, ""),
            fields={f.name: comments.get((*path, 2, k), "") for k, f in enumerate(message.field)},
            oneofs={k: o.name for k, o in enumerate(message.oneof_decl) if k not in synthetic},
        )
        for k, nested in enumerate(message.nested_type):
            self._message(nested, name, (*path, 3, k), comments)
        for k, enum in enumerate(message.enum_type):
            self._enum(enum, name, (*path, 4, k), comments)

    def _enum(
        self,
        enum: descriptor_pb2.EnumDescriptorProto,
        prefix: str,
        path: tuple[int, ...],
        comments: Mapping[tuple[int, ...], str],
    ) -> None:
        self.enums[f"{prefix}.{enum.name}"] = _Enum(
            proto=enum,
            comment=comments.get(path, ""),
            values={v.name: comments.get((*path, 2, k), "") for k, v in enumerate(enum.value)},
        )


@dataclasses.dataclass(frozen=True)
class Binding:
    """One REST route of a method: a verb, a path template and what the body binds."""

    method: _Method
    verb: str  # lower case
    template: str  # as the rule writes it: `/v1/train/jobs/{id}`
    body: str  # "" (no body), "*" (the whole request) or one field's name
    index: int  # 0 for the rule itself, then its additional bindings

    @property
    def path(self) -> str:
        """The template as OpenAPI writes it: `{name=segments/*}` becomes `{name}`."""
        return re.sub(r"{([^}=]+)(=[^}]*)?}", r"{\1}", self.template)

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{([^}=]+)", self.template)

    @property
    def operation_id(self) -> str:
        base = f"{self.method.service.name}_{self.method.proto.name}"
        return base if self.index == 0 else f"{base}_{self.index + 1}"


def bindings(descriptors: _Descriptors) -> list[Binding]:
    """Every REST route of every `trainyard.*` service, in the descriptor's order."""
    found = []
    for method in descriptors.methods:
        if not method.proto.options.HasExtension(annotations_pb2.http):
            continue
        rule = method.proto.options.Extensions[annotations_pb2.http]
        rules: list[http_pb2.HttpRule] = [rule, *rule.additional_bindings]
        for index, each in enumerate(rules):
            verb = each.WhichOneof("pattern")
            if verb == "custom":
                verb, template = each.custom.kind.lower(), each.custom.path
            elif verb in VERBS:
                template = getattr(each, verb)
            else:
                continue
            found.append(Binding(method, verb, template, each.body, index))
    return found


def _nullable(schema: Schema) -> Schema:
    """`schema`, or `null` where the answer has none (gateway/rules.py's `NULLABLE`)."""
    notes: Schema = {
        k: schema.pop(k) for k in ("description", "readOnly", "writeOnly") if k in schema
    }
    return {"anyOf": [schema, {"type": "null"}], **notes}


def _behaviors(field: descriptor_pb2.FieldDescriptorProto) -> set[int]:
    return set(field.options.Extensions[field_behavior_pb2.field_behavior])


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name.lstrip('.')}"}


class _Generator:
    def __init__(self, descriptors: _Descriptors) -> None:
        self.d = descriptors
        self.schemas: dict[str, Schema] = {}
        self.answers: dict[str, Schema] = {}  # refusal bodies by status
        self.responses_: dict[str, Schema] = {}  # refusals many routes share

    # Schemas -------------------------------------------------------------------------

    def _type(self, type_name: str) -> Schema:
        """A message or enum type: a well-known type inline, any other a reference to its
        component schema (made on first use)."""
        if type_name in _WELL_KNOWN:
            return dict(_WELL_KNOWN[type_name])
        key = type_name.lstrip(".")
        if key not in self.schemas:
            self.schemas[key] = {}  # reserved first: a message may reach itself
            if type_name in self.d.enums:
                self.schemas[key] = self._enum_schema(self.d.enums[type_name])
            else:
                self.schemas[key] = self._message_schema(type_name)
        return _ref(type_name)

    def _enum_schema(self, enum: _Enum) -> Schema:
        lines = [enum.comment] if enum.comment else []
        lines += [f"- `{name}`: {text}" for name, text in enum.values.items() if text]
        schema: Schema = {"type": "string", "enum": [v.name for v in enum.proto.value]}
        if lines:
            schema["description"] = "\n".join(lines)
        return schema

    def _map_entry(self, field: descriptor_pb2.FieldDescriptorProto) -> _Message | None:
        if field.label != _F.LABEL_REPEATED or field.type != _F.TYPE_MESSAGE:
            return None
        entry = self.d.messages.get(field.type_name)
        return entry if entry is not None and entry.proto.options.map_entry else None

    def _value(self, field: descriptor_pb2.FieldDescriptorProto) -> Schema:
        """One value of a field in a JSON body, repetition aside."""
        if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP, _F.TYPE_ENUM):
            return self._type(field.type_name)
        return dict(_JSON_SCALARS[field.type])

    def field_schema(self, field: descriptor_pb2.FieldDescriptorProto, comment: str) -> Schema:
        entry = self._map_entry(field)
        if entry is not None:
            key, value = entry.proto.field
            schema: Schema = {"type": "object", "additionalProperties": self._value(value)}
            if key.type != _F.TYPE_STRING:
                schema["propertyNames"] = {"pattern": "^-?[0-9]+$|^true$|^false$"}
        elif field.label == _F.LABEL_REPEATED:
            schema = {"type": "array", "items": self._value(field)}
        else:
            schema = self._value(field)
        behaviors = _behaviors(field)
        if field_behavior_pb2.OUTPUT_ONLY in behaviors:
            schema["readOnly"] = True
        if field_behavior_pb2.INPUT_ONLY in behaviors:
            schema["writeOnly"] = True
        if field.type in _WIDE and "below 2^53" not in comment:
            comment = f"{comment}\n\n{_EXACT}" if comment else _EXACT
        if comment:
            schema["description"] = comment
        return schema

    def _message_schema(self, type_name: str, *, leave_out: Iterable[str] = ()) -> Schema:
        message = self.d.messages[type_name]
        left_out = set(leave_out)
        fields = [f for f in message.proto.field if f.name not in left_out]
        schema: Schema = {
            "type": "object",
            "properties": {f.name: self.field_schema(f, message.fields[f.name]) for f in fields},
        }
        for name in NULLABLE.get(type_name[1:], ()):
            if name in schema["properties"]:
                schema["properties"][name] = _nullable(schema["properties"][name])
        notes = [message.comment] if message.comment else []
        for index, name in sorted(message.oneofs.items()):
            members = [
                f"`{f.name}`"
                for f in fields
                if f.HasField("oneof_index") and f.oneof_index == index
            ]
            if members:
                notes.append(f"At most one of {', '.join(members)} is set (`{name}`).")
        if notes:
            schema["description"] = "\n\n".join(notes)
        return schema

    # Operations ----------------------------------------------------------------------

    def _field(self, message: str, dotted: str) -> tuple[descriptor_pb2.FieldDescriptorProto, str]:
        """A field by its path from a message (`id`, `job.id`), with its comment."""
        *parents, last = dotted.split(".")
        for part in parents:
            field = next(f for f in self.d.messages[message].proto.field if f.name == part)
            message = field.type_name
        owner = self.d.messages[message]
        field = next(f for f in owner.proto.field if f.name == last)
        return field, owner.fields[last]

    def _text_param(
        self, where: str, name: str, field: descriptor_pb2.FieldDescriptorProto, comment: str
    ) -> Schema:
        enum = field.type == _F.TYPE_ENUM
        value = self._type(field.type_name) if enum else dict(_TEXT_SCALARS[field.type])
        repeated = field.label == _F.LABEL_REPEATED
        param: Schema = {
            "name": name,
            "in": where,
            "required": where == "path" or field_behavior_pb2.REQUIRED in _behaviors(field),
            "schema": {"type": "array", "items": value} if repeated else value,
        }
        if comment:
            param["description"] = comment
        return param

    def parameters(self, binding: Binding) -> list[Schema]:
        request = binding.method.proto.input_type
        params = [
            self._text_param("path", name, *self._field(request, name))
            for name in binding.path_params
        ]
        message = self.d.messages[request]
        if binding.body != "*":
            # The transcoder reads every other scalar field from the query.
            taken = {name.split(".")[0] for name in binding.path_params} | {binding.body}
            params += [
                self._text_param("query", f.name, f, message.fields[f.name])
                for f in message.proto.field
                if f.name not in taken
                and f.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP)
                and self._map_entry(f) is None
            ]
        # A field its comment says a header also sets (`Idempotency-Key`).
        for f in message.proto.field:
            header = _HEADER.search(message.fields[f.name])
            if header and f.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
                param = self._text_param("header", header.group(1), f, message.fields[f.name])
                param["required"] = False
                params.append(param)
        params.append({"$ref": "#/components/parameters/OrgId"})
        return params

    def request_body(self, binding: Binding) -> Schema | None:
        if not binding.body:
            return None
        request = binding.method.proto.input_type
        message = self.d.messages[request]
        required = False
        whole = binding.body == "*" or self._stands_for_request(request, binding.body)
        if whole:
            taken = {name.split(".")[0] for name in binding.path_params} | {binding.body}
            schema = self._message_schema(request, leave_out=taken)
            if binding.body != "*":
                schema["description"] = (
                    f"{schema.get('description', '')}\n\nThe request's fields as JSON, bound "
                    f"to `{binding.body}` and read strictly by the service: an unknown field "
                    "is refused `invalid_request`, naming it."
                ).strip()
            needed = [
                f.name
                for f in message.proto.field
                if f.name not in taken and field_behavior_pb2.REQUIRED in _behaviors(f)
            ]
            if needed:
                schema["required"] = needed
                required = True
        else:
            field, comment = self._field(request, binding.body)
            schema = self._struct_bound(request, field, comment) or self.field_schema(
                field, comment
            )
            required = True
        if binding.method.proto.client_streaming:
            schema = {
                **schema,
                "description": "A stream: newline-delimited JSON, one object per line.\n\n"
                + schema.get("description", ""),
            }
        return {"required": required, "content": {"application/json": {"schema": schema}}}

    def _stands_for_request(self, request: str, body: str) -> bool:
        """A `google.protobuf.Struct` body the service reads as the request's own fields:
        every one but a job's, which stands for the request's `job`."""
        fields = {f.name: f for f in self.d.messages[request].proto.field}
        struct = fields[body].type_name == ".google.protobuf.Struct"
        return struct and "job" not in fields

    def _struct_bound(
        self, request: str, field: descriptor_pb2.FieldDescriptorProto, comment: str
    ) -> Schema | None:
        """A body bound to a `google.protobuf.Struct` that the service parses strictly into
        the request's one typed message field (ARCHITECTURE.md §3): that message's schema."""
        if field.type_name != ".google.protobuf.Struct":
            return None
        typed = [
            f
            for f in self.d.messages[request].proto.field
            if f is not field and f.type == _F.TYPE_MESSAGE and f.type_name not in _WELL_KNOWN
        ]
        if len(typed) != 1 or typed[0].label == _F.LABEL_REPEATED:
            return None
        note = (
            f"The `{typed[0].name}` object as JSON, bound to `{field.name}` and parsed by the "
            "service, which refuses unknown fields."
        )
        return {
            **self._type(typed[0].type_name),
            "description": f"{comment}\n\n{note}" if comment else note,
        }

    def responses(self, binding: Binding, *, has_body: bool) -> Schema:
        method = binding.method
        output = method.proto.output_type
        described = self.d.messages.get(output)
        ok_text = _summary(described.comment) if described and described.comment else "OK"
        if output == _HTTP_BODY:
            content: Schema = {"application/octet-stream": {"schema": {}}}
        else:
            schema = self._type(output)
            if method.proto.server_streaming:
                ok_text = (
                    f"A stream of `{output.rsplit('.', 1)[-1]}` messages as newline-delimited "
                    f"JSON, one object per line. {ok_text}"
                )
            content = {"application/json": {"schema": schema}}
            if method.proto.server_streaming:
                content["application/json"]["x-stream"] = "newline-delimited-json"
        out: Schema = {"200": {"description": ok_text, "content": content}}
        if method.full_name in NO_CONTENT:
            out["204"] = {"description": "Nothing came in time: no body."}
        if method.full_name in ACCEPTED:
            out["202"] = {
                "description": "The call has not ended within `wait`: its future, `queued` or "
                "`running` with its queue position; read it at `GET /v1/train/futures/{id}`.",
                "content": content,
            }
        by_status: dict[int, list[str]] = {}
        for reason in operation_reasons(method, has_body=has_body):
            by_status.setdefault(_status(method, reason), []).append(reason)
        common = {*COMMON_REASONS, *(BODY_REASONS if has_body else ())}
        for status, reasons in sorted(by_status.items()):
            response = self._refusal(status, reasons, retry=method.full_name == RETRY)
            if set(reasons) <= common and response == self._refusal(status, reasons):
                # The same answer on every route that meets only the common reasons.
                name = _phrase(status).replace(" ", "")
                if BODY_REASONS[0] in reasons:
                    name += "Body"
                self.responses_[name] = response
                response = {"$ref": f"#/components/responses/{name}"}
            out[str(status)] = response
        if has_body:
            self.responses_["ContentTooLarge"] = {
                "description": f"{_phrase(TOO_LARGE)}: the body is larger "
                "than the gateway takes (`PAYLOAD_TOO_LARGE`).",
                "content": {
                    rest.PROBLEM_CONTENT_TYPE: {"schema": self._answer("Problem", TOO_LARGE)}
                },
            }
            out[str(TOO_LARGE)] = {"$ref": "#/components/responses/ContentTooLarge"}
        return out

    def _refusal(self, status: int, reasons: list[str], *, retry: bool = False) -> Schema:
        listed = ", ".join(f"`{r.lower()}`" for r in reasons)
        response: Schema = {
            "description": f"{_phrase(status)}: {listed}.",
            "content": {},
        }
        if any(r not in rest.MONEY for r in reasons):
            response["content"][rest.PROBLEM_CONTENT_TYPE] = {
                "schema": self._answer("Problem", status, retry=retry)
            }
        if any(r in rest.MONEY for r in reasons):
            response["content"]["application/json"] = {
                "schema": self._answer("Error", status, retry=retry)
            }
        if status == http.HTTPStatus.METHOD_NOT_ALLOWED:
            response["headers"] = {
                "Allow": {
                    "description": "The methods the path takes.",
                    "schema": {"type": "string"},
                }
            }
        return response

    def _answer(self, kind: str, status: int, *, retry: bool = False) -> Schema:
        """A reference to the refusal body of one status: `Problem409` is a `Problem` whose
        `status` is 409 and whose `code` is any reason the table answers 409 with (`Error402`
        likewise), so every body the table allows matches it; `RetryProblem409` is the table
        as a retry meets it, where that differs."""
        codes = _codes(kind, status, retry=retry)
        name = f"{kind}{status}"
        if retry and codes != _codes(kind, status):
            name = f"Retry{name}"
        if name not in self.answers:
            self.answers[name] = _problem(status, codes) if kind == "Problem" else _money(codes)
        return {"$ref": f"#/components/schemas/{name}"}

    def operation(self, binding: Binding) -> Schema:
        method = binding.method
        body = self.request_body(binding)
        op: Schema = {
            "operationId": binding.operation_id,
            "tags": [method.service.name],
            "parameters": self.parameters(binding),
            "responses": self.responses(binding, has_body=body is not None),
            "x-grpc-method": f"/{method.package}.{method.service.name}/{method.proto.name}",
        }
        if method.comment:
            op["summary"] = _summary(method.comment)
            op["description"] = method.comment
        if body is not None:
            op["requestBody"] = body
        if method.proto.output_type == _HTTP_BODY:
            op["security"] = []  # a download: the token in its path is the credential
        if method.proto.options.deprecated:
            op["deprecated"] = True
        return op


def operation_reasons(method: _Method, *, has_body: bool) -> list[str]:
    """The reasons a method's REST route can answer, in the table's order."""
    named = {
        *COMMON_REASONS,
        *(BODY_REASONS if has_body else ()),
        *_BACKTICKED.findall(method.comment),
        *REASONS.get(method.full_name, ()),
        *SERVICE_REASONS.get(f"{method.package}.{method.service.name}", ()),
    }
    return [r for r in rest.STATUSES if r in named]


def _status(method: _Method, reason: str) -> int:
    return rest.status_of(reason, retry=method.full_name == RETRY)


def _codes(kind: str, status: int, *, retry: bool = False) -> list[str]:
    """The reasons the table answers a status with, in a `Problem` or the money `Error`."""
    if status == TOO_LARGE:
        return ["PAYLOAD_TOO_LARGE"]
    money = kind == "Error"
    return [
        r
        for r in rest.STATUSES
        if rest.status_of(r, retry=retry) == status and (r in rest.MONEY) == money
    ]


def _problem(status: int, codes: list[str]) -> Schema:
    return {
        "allOf": [{"$ref": "#/components/schemas/Problem"}],
        "properties": {"status": {"const": status}, "code": {"enum": [c.lower() for c in codes]}},
    }


def _money(codes: list[str]) -> Schema:
    return {
        "allOf": [{"$ref": "#/components/schemas/Error"}],
        "properties": {
            "error": {"properties": {"code": {"enum": [c.lower() for c in codes]}}},
        },
    }


def _version() -> str:
    if PYPROJECT.exists():
        with PYPROJECT.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    return importlib.metadata.version("trainyard")


def _common_schemas() -> dict[str, Schema]:
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "Problem": {
            "type": "object",
            "description": "An RFC 9457 problem document (`application/problem+json`): every "
            "REST refusal but the money wire's. `detail` is safe text, never the caller's input.",
            "required": ["type", "title", "status", "detail", "code"],
            "properties": {
                "type": {"type": "string", "format": "uri", "description": "The reason's page."},
                "title": {"type": "string", "description": "The reason in words."},
                "status": {"type": "integer", "minimum": 400, "maximum": 599},
                "detail": {"type": "string"},
                "code": {
                    "type": "string",
                    "enum": [r.lower() for r in rest.STATUSES if r not in rest.MONEY],
                    "description": "The stable reason: `google.rpc.ErrorInfo.reason` in lower "
                    "case, the seeds' word where they name one.",
                },
                "fields": {**strings, "description": "The fields at fault, by name only."},
                "supported": {**strings, "description": "What a closed set accepts."},
                "metadata": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Other safe values of the refusal.",
                },
            },
        },
        "Error": {
            "type": "object",
            "description": "A money refusal, as the money wire writes it (HIP-1333 §3).",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "string", "enum": [r.lower() for r in _MONEY]},
                        "message": {"type": "string"},
                    },
                }
            },
        },
    }


def _document_operation() -> Schema:
    return {
        "get": {
            "operationId": "Gateway_GetOpenApi",
            "summary": "This document.",
            "description": "The REST surface as OpenAPI 3.1, generated from the protos' "
            "`google.api.http` rules and the status table (`gateway/openapi.json`).",
            "tags": ["Gateway"],
            "security": [],
            "responses": {
                "200": {
                    "description": "The OpenAPI document.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
        }
    }


def generate(descriptor: Path = DESCRIPTOR) -> dict[str, Any]:
    """The OpenAPI document of the descriptor set's REST routes."""
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor.read_bytes()).file
    descriptors = _Descriptors(files)
    gen = _Generator(descriptors)
    paths: dict[str, dict[str, Schema]] = {DOCUMENT_PATH: _document_operation()}
    tags: dict[str, str] = {"Gateway": "The gateway's own routes."}
    for binding in bindings(descriptors):
        item = paths.setdefault(binding.path, {})
        if binding.verb in item:
            raise ValueError(f"two operations at {binding.verb.upper()} {binding.path}")
        item[binding.verb] = gen.operation(binding)
        tags[binding.method.service.name] = _summary(binding.method.service_comment)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Trainyard",
            "version": _version(),
            "description": "Trainyard's REST surface: the gateway transcodes each route to "
            "its gRPC method. Bodies and answers are proto3 JSON with the protos' field names "
            "(64-bit integers are decimal strings). A refusal is an RFC 9457 problem document "
            "(`application/problem+json`) whose `code` is the stable reason; the money "
            'refusals answer `{"error": {"code", "message"}}`. Generated from the protos by '
            "`gateway/openapi.py`.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "tags": [{"name": name, "description": text} for name, text in sorted(tags.items())],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key: `Authorization: Bearer ty_…`. The org is "
                    "the key's; its role decides which methods it may call.",
                }
            },
            "responses": gen.responses_,
            "parameters": {
                "OrgId": {
                    "name": "x-org-id",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The org the call acts in, for the keys that may act "
                    "across orgs (platform, operator); every such call is audited. Other keys "
                    "act in their own org only.",
                }
            },
            "schemas": {**gen.schemas, **gen.answers, **_common_schemas()},
        },
    }


def render(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def operations(document: Mapping[str, Any]) -> Iterator[tuple[str, str, Schema]]:
    """(verb, path, operation) for every operation of a document."""
    for path, item in document["paths"].items():
        for verb, op in item.items():
            if verb in (*VERBS, "head", "options", "trace"):
                yield verb, path, op


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateway.openapi", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--descriptor", type=Path, default=DESCRIPTOR)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="fail when --output is stale")
    args = parser.parse_args(argv)
    text = render(generate(args.descriptor))
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"stale: {args.output} (run `make gen`)", file=sys.stderr)
            return 1
        print(f"{args.output} is current")
        return 0
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
