"""The OpenAPI document of the REST surface (gateway/openapi.json): current with the
descriptor set, valid OpenAPI 3.1, one operation per `google.api.http` rule, every
refusal of the status table documented, and schemas that the JSON Envoy prints matches."""

from __future__ import annotations

import importlib
import json
import pkgutil
from typing import Any

import jsonschema
import lupa.luajit21 as luajit
import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, json_format
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

import trainyard
from gateway import openapi, render, rules
from trainyard import rest

EVERY_OPERATION = ("200", "400", "401", "403", "404", "405", "409", "500", "503")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return json.loads(openapi.OUTPUT.read_text(encoding="utf-8"))


def rpc_operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(v, p, op) for v, p, op in openapi.operations(doc) if p != openapi.DOCUMENT_PATH]


def http_rules() -> list[tuple[str, str, str, str]]:
    """(service, method, verb, template) of every rule, read apart from the generator."""
    files = descriptor_pb2.FileDescriptorSet.FromString(openapi.DESCRIPTOR.read_bytes()).file
    found = []
    for file in files:
        if not file.package.startswith("trainyard."):
            continue
        for service in file.service:
            for method in service.method:
                rule = method.options.Extensions[annotations_pb2.http]
                for each in (rule, *rule.additional_bindings):
                    verb = each.WhichOneof("pattern")
                    if verb:
                        found.append((service.name, method.name, verb, getattr(each, verb)))
    return found


def test_the_committed_document_is_current() -> None:
    assert openapi.OUTPUT.read_text(encoding="utf-8") == openapi.render(openapi.generate()), (
        "gateway/openapi.json is stale: run `make gen`"
    )
    assert openapi.main(["--check"]) == 0


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"
    validate(document, cls=OpenAPIV31SpecValidator)
    assert document["servers"] == [{"url": "/"}]
    assert document["components"]["securitySchemes"]["bearer"] == {
        **document["components"]["securitySchemes"]["bearer"],
        "type": "http",
        "scheme": "bearer",
    }


def test_every_http_rule_is_an_operation(document: dict[str, Any]) -> None:
    rules = http_rules()
    assert len(rules) >= 40
    ops = {(v, p): op for v, p, op in rpc_operations(document)}
    for service, method, verb, template in rules:
        op = ops.get((verb, template))
        assert op is not None, f"{verb.upper()} {template} ({service}.{method}) is not documented"
        assert op["operationId"].startswith(f"{service}_{method}")
        assert op["x-grpc-method"].endswith(f".{service}/{method}")
        assert op.get("summary"), f"{service}.{method} has no summary"
    assert len(ops) == len(rules), "an operation no http rule declares"
    ids = [op["operationId"] for _, _, op in openapi.operations(document)]
    assert len(ids) == len(set(ids))


def test_the_document_itself_is_an_operation(document: dict[str, Any]) -> None:
    op = document["paths"][openapi.DOCUMENT_PATH]["get"]
    assert op["security"] == [] and "application/json" in op["responses"]["200"]["content"]


def resolve(doc: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in item:
        *_, kind, name = item["$ref"].split("/")
        item = doc["components"][kind][name]
    return item


def test_every_operation_documents_the_refusals(document: dict[str, Any]) -> None:
    table = {status for status, _ in rest.STATUSES.values()}
    seen: set[int] = set()
    for verb, path, op in rpc_operations(document):
        responses = op["responses"]
        missing = [s for s in EVERY_OPERATION if s not in responses]
        assert not missing, f"{verb.upper()} {path} lacks {missing}"
        assert "x-org-id" in [resolve(document, p)["name"] for p in op["parameters"]]
        for status, response in responses.items():
            code = int(status)
            response = resolve(document, response)
            if code < 400:
                continue
            seen.add(code)
            assert code in table or code == openapi.TOO_LARGE, f"{path}: {code} not in the table"
            content = response["content"]
            assert set(content) <= {rest.PROBLEM_CONTENT_TYPE, "application/json"}, path
            for media in content.values():
                assert resolve(document, media["schema"]), path
        if "requestBody" in op:
            assert str(openapi.TOO_LARGE) in responses
    # Every status the table gives is met by some route; 501 only by a method a deployment
    # declares and does not serve, and every declared method is served.
    assert table - seen <= {rest.status_of("UNIMPLEMENTED")}, table - seen


def test_the_refusals_each_route_names_take_their_table_status(document: dict[str, Any]) -> None:
    assert set(openapi.REASONS) <= {
        f"{b.method.full_name}" for b in openapi.bindings(descriptors())
    }
    tables = (*openapi.REASONS.values(), *openapi.SERVICE_REASONS.values())
    named = {r for reasons in tables for r in reasons}
    assert named <= set(rest.STATUSES)
    create = document["paths"]["/v1/train/jobs"]["post"]["responses"]
    assert "`training_dataset_empty`" in create["422"]["description"]
    assert "`insufficient_balance`" in create["402"]["description"]
    assert "application/json" in create["503"]["content"]
    retry = document["paths"]["/v1/train/jobs/{id}/retry"]["post"]["responses"]
    assert "`training_duration_exceeds_limit`" in retry["409"]["description"] and "422" not in retry
    delete = document["paths"]["/v1/train/artifacts/{sha256}"]["delete"]["responses"]
    assert (
        "`published`" in delete["409"]["description"] and "`in_use`" in delete["409"]["description"]
    )


def descriptors() -> Any:
    files = descriptor_pb2.FileDescriptorSet.FromString(openapi.DESCRIPTOR.read_bytes()).file
    return openapi._Descriptors(files)


def test_the_claim_route_answers_204_without_a_body(document: dict[str, Any]) -> None:
    responses = document["paths"]["/v1/train/jobs/claim"]["post"]["responses"]
    assert "204" in responses and "content" not in responses["204"]
    assert (
        "trainyard.claim.v1.ClaimTaskResponse"
        in responses["200"]["content"]["application/json"]["schema"]["$ref"]
    )


def schema_validator(document: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    root = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(
        root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


@pytest.mark.parametrize("reason", [r for r in rest.STATUSES if r != "UNIMPLEMENTED"])
def test_every_refusal_the_table_renders_matches_its_status_schema(
    document: dict[str, Any], reason: str
) -> None:
    for retry in (False, True):
        status = rest.status_of(reason, retry=retry)
        body = rest.refusal(
            reason,
            "A safe detail.",
            status=status,
            fields=["page_size"],
            metadata={"supported": "a,b", "limit": "64"},
        )
        kind = "Error" if reason in rest.MONEY else "Problem"
        names = [f"{kind}{status}", f"Retry{kind}{status}"] if retry else [f"{kind}{status}"]
        present = [n for n in names if n in document["components"]["schemas"]]
        schema_validator(document, present[-1]).validate(body)
        schema_validator(document, kind).validate(body)


def filled(message: Message, depth: int = 0) -> Message:
    """The message with every field set to a value unlike its default (one of each oneof)."""
    oneofs: set[str] = set()
    for field in message.DESCRIPTOR.fields:
        if field.containing_oneof is not None and not field.containing_oneof.name.startswith("_"):
            if field.containing_oneof.name in oneofs:
                continue
            oneofs.add(field.containing_oneof.name)
        repeated = field.is_repeated
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                key_field, value_field = field.message_type.fields
                key = _scalar(key_field)
                target = getattr(message, field.name)
                if value_field.message_type is not None:
                    if depth < 3:
                        _fill_well_known(target[key], depth)
                else:
                    target[key] = _scalar(value_field)
                continue
            if depth >= 3:
                continue
            target = (
                getattr(message, field.name).add() if repeated else getattr(message, field.name)
            )
            _fill_well_known(target, depth)
            continue
        value = _scalar(field)
        if repeated:
            getattr(message, field.name).append(value)
        else:
            setattr(message, field.name, value)
    return message


def _fill_well_known(target: Message, depth: int) -> None:
    name = target.DESCRIPTOR.full_name
    if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        target.seconds, target.nanos = 1_700_000_000, 5_000  # type: ignore[attr-defined]
    elif name == "google.protobuf.Struct":
        target.update({"a": 1, "b": ["x"]})  # type: ignore[attr-defined]
    elif not name.startswith("google.protobuf."):
        filled(target, depth + 1)


def _scalar(field: descriptor.FieldDescriptor) -> Any:
    t = descriptor.FieldDescriptor
    if field.type == t.TYPE_ENUM:
        return field.enum_type.values[-1].number
    if field.type == t.TYPE_BOOL:
        return True
    if field.type == t.TYPE_STRING:
        return "text"
    if field.type == t.TYPE_BYTES:
        return b"\x00bytes"
    if field.type in (t.TYPE_DOUBLE, t.TYPE_FLOAT):
        return 1.5
    if field.type in (t.TYPE_INT64, t.TYPE_SINT64, t.TYPE_SFIXED64, t.TYPE_UINT64, t.TYPE_FIXED64):
        return 2**40 + 1
    return 7


def message_schemas(document: dict[str, Any]) -> list[str]:
    for module in pkgutil.walk_packages(trainyard.__path__, "trainyard."):
        if module.name.endswith("_pb2"):
            importlib.import_module(module.name)
    return [name for name in document["components"]["schemas"] if name.startswith("trainyard.")]


def test_the_json_envoy_prints_matches_each_message_schema(document: dict[str, Any]) -> None:
    lua = luajit.LuaRuntime()
    lua.execute(render._lua())
    lua = lua.globals()
    pool = descriptor_pool.Default()
    names = message_schemas(document)
    assert "trainyard.job.v1.Job" in names
    for name in names:
        try:
            kind = pool.FindMessageTypeByName(name)
        except KeyError:
            continue  # an enum
        cls = GetMessageClass(kind)
        for message in (cls(), filled(cls())):
            # As the transcoder prints it (gateway/envoy.yaml.tmpl's print_options), then
            # the REST face rewrites it (gateway/rest.lua).
            printed = json_format.MessageToDict(
                message,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            )
            if name in rules.shapes():
                printed = json.loads(lua.reshape(json.dumps(printed), name))
            errors = list(schema_validator(document, name).iter_errors(printed))
            assert not errors, f"{name}: {errors[0].message} at {list(errors[0].absolute_path)}"


def test_parameters_follow_the_rules(document: dict[str, Any]) -> None:
    def params(path: str, verb: str) -> dict[tuple[str, str], dict[str, Any]]:
        ops = document["paths"][path][verb]["parameters"]
        return {(p["in"], p["name"]): p for p in (resolve(document, q) for q in ops)}

    read = params("/v1/train/jobs/{id}", "get")
    assert read["path", "id"]["required"] is True
    assert {("query", "identifier"), ("query", "project"), ("header", "x-org-id")} <= set(read)
    metrics = params("/v1/train/jobs/{id}/metrics", "get")
    assert metrics["query", "names"]["schema"]["type"] == "array"
    retry = params("/v1/train/jobs/{id}/retry", "post")
    assert ("header", "Idempotency-Key") in retry
    report = document["paths"]["/v1/train/jobs/{id}/events"]["post"]["requestBody"]
    body = report["content"]["application/json"]["schema"]
    assert "id" not in body["properties"] and "body" not in body["properties"]
    assert {"task", "lease"} <= set(body["required"]) and "read strictly" in body["description"]
    create = document["paths"]["/v1/train/jobs"]["post"]["requestBody"]
    assert create["content"]["application/json"]["schema"]["$ref"].endswith("trainyard.job.v1.Job")
