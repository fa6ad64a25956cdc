"""The platform as a user meets it: `trainyard up`, then REST and gRPC through Envoy."""

from __future__ import annotations

import json

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from gateway.render import SERVICES
from tests.support import StackProcess, alive, bearer, reason
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc


def test_the_gateway_reports_every_service_healthy(stack: StackProcess) -> None:
    assert httpx.get(f"{stack.url}/healthz").status_code == 200


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_answers_grpc_health_through_the_gateway(
    stack: StackProcess, name: str
) -> None:
    with stack.channel() as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICES[name]),
            metadata=[("x-trainyard-service", name)],
            timeout=5,
        )
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_models_over_rest_lists_the_fixture_with_its_profile(
    stack: StackProcess, member_key: str
) -> None:
    r = httpx.get(f"{stack.url}/v1/train/models", headers=bearer(member_key))
    assert r.status_code == 200
    (model,) = [m for m in r.json()["models"] if m["name"] == "fixture-tiny-llm"]
    defaults = model["profile"]["defaults"]
    assert defaults["per_device_train_batch_size"] * defaults["gradient_accumulation_steps"] == 8
    assert "full" in model["support"]["adaptations"]
    assert {"field": "hyperparameters.max_steps", "min": 1, "max": 100} in model["profile"][
        "ranges"
    ]


def test_models_over_grpc_through_the_same_port(stack: StackProcess, member_key: str) -> None:
    with stack.channel() as channel:
        answer = job_service_pb2_grpc.JobServiceStub(channel).ListModels(
            job_service_pb2.ListModelsRequest(),
            metadata=list(bearer(member_key).items()),
            timeout=10,
        )
    assert [m.name for m in answer.models] == ["fixture-tiny-decider", "fixture-tiny-llm"]


@pytest.mark.parametrize(
    "headers", [{}, bearer("ty_not-a-real-key"), {"authorization": "Basic eDp5"}]
)
def test_no_valid_key_is_401_unauthenticated(stack: StackProcess, headers: dict[str, str]) -> None:
    r = httpx.get(f"{stack.url}/v1/train/models", headers=headers)
    assert r.status_code == 401
    assert reason(r) == "unauthenticated"


def test_no_valid_key_over_grpc_is_unauthenticated_with_error_info(stack: StackProcess) -> None:
    with stack.channel() as channel, pytest.raises(grpc.RpcError) as caught:
        job_service_pb2_grpc.JobServiceStub(channel).ListModels(
            job_service_pb2.ListModelsRequest(), timeout=10
        )
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    status = rpc_status.from_call(caught.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("UNAUTHENTICATED", "trainyard.dev")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/train/nope"),
        ("GET", "/v2/train/models"),
        ("GET", "/"),
    ],
)
def test_an_unknown_route_is_404_not_found(
    stack: StackProcess, member_key: str, method: str, path: str
) -> None:
    r = httpx.request(method, f"{stack.url}{path}", headers=bearer(member_key))
    assert r.status_code == 404
    assert reason(r) == "not_found"


@pytest.mark.parametrize(
    "body",
    [
        b'{"base_model": "SECRET-MARKER-7f3a',
        b"SECRET-MARKER-7f3a",
        b'["SECRET-MARKER-7f3a"]',
        b'{"base_model": SECRET-MARKER-7f3a}',
        b'{"base_model": "x",,, "SECRET-MARKER-7f3a": 1}',
    ],
)
def test_malformed_json_is_400_and_echoes_nothing(
    stack: StackProcess, member_key: str, body: bytes
) -> None:
    r = httpx.post(
        f"{stack.url}/v1/train/jobs",
        content=body,
        headers={**bearer(member_key), "content-type": "application/json"},
    )
    assert r.status_code == 400
    assert reason(r) == "malformed_json"
    assert b"SECRET-MARKER" not in r.content
    assert "SECRET-MARKER" not in json.dumps(dict(r.headers))


def test_a_body_of_the_wrong_shape_echoes_nothing(stack: StackProcess, member_key: str) -> None:
    r = httpx.post(
        f"{stack.url}/v1/train/jobs/job_0123456789abcdef/cancel",
        json={"id": 987654321},
        headers=bearer(member_key),
    )
    assert r.status_code == 400
    assert b"987654321" not in r.content


def test_an_unknown_query_parameter_is_refused(stack: StackProcess, member_key: str) -> None:
    r = httpx.get(f"{stack.url}/v1/train/models?SECRET-MARKER-7f3a=1", headers=bearer(member_key))
    assert r.status_code == 400
    assert reason(r) == "invalid_request"
    assert b"SECRET-MARKER" not in r.content


def test_a_member_lists_the_orgs_training_clients_and_may_create_one(
    stack: StackProcess, member_key: str
) -> None:
    r = httpx.get(f"{stack.url}/v1/train/clients", headers=bearer(member_key))
    assert r.status_code == 200
    assert r.json().get("clients", []) == []
    # Allowed (each client runs in an engine of its own): this one is refused for its base,
    # not for the member's role.
    body = {"base_model": "fixture-tiny-decider"}
    r = httpx.post(f"{stack.url}/v1/train/clients", json=body, headers=bearer(member_key))
    assert r.status_code == 400
    assert reason(r) == "unsupported_base"


def test_a_member_may_not_call_an_admin_method(stack: StackProcess, member_key: str) -> None:
    r = httpx.post(f"{stack.url}/v1/train/rates", json={"meter": "x"}, headers=bearer(member_key))
    assert r.status_code == 403
    assert reason(r) == "permission_denied"


def test_the_admin_interface_listens_on_a_socket_of_the_stacks_user_only(
    stack: StackProcess,
) -> None:
    config = (stack.home / "run" / "envoy.yaml").read_text()
    admin = config.split("admin:", 1)[1].split("static_resources:", 1)[0]
    assert "socket_address" not in admin and "mode: 384" in admin  # 0600
    assert alive(stack.info()["pids"]["envoy"])


def test_restart_on_the_same_home_keeps_rows_and_objects(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from infra.objectstore import credentials
    from services.core.s3 import client as s3_client

    first = StackProcess(tmp_path / "home").start()
    try:
        key = first.create_key("acme", "member")
        access, secret, _ = credentials(first.home)
        s3_client(first.info()["s3_endpoint"], access, secret).put_object(
            Bucket="trainyard", Key="acme/kept", Body=b"kept bytes"
        )
        pids = list(first.info()["pids"].values())
    finally:
        assert first.stop() == 0
    assert not any(alive(pid) for pid in pids), "a child outlived the stack"
    assert not (first.home / "run" / "stack.json").exists()

    second = StackProcess(first.home).start()
    try:
        r = httpx.get(f"{second.url}/v1/train/models", headers=bearer(key))
        assert r.status_code == 200
        obj = s3_client(second.info()["s3_endpoint"], access, secret).get_object(
            Bucket="trainyard", Key="acme/kept"
        )
        assert obj["Body"].read() == b"kept bytes"
    finally:
        assert second.stop() == 0
