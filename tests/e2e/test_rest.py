"""The REST face as HIP-1333 writes it, through the gateway: statuses from the seeds,
RFC 9457 problem documents, 405 with `Allow`, 204 for an empty claim, empty query values
as unset, and a bad query value named; gRPC clients keep `google.rpc.Status`."""

from __future__ import annotations

import hashlib
import secrets

import grpc
import httpx
import pytest

from tests.support import StackProcess, bearer, reason
from trainyard.job.v1 import job_service_pb2, job_service_pb2_grpc
from trainyard.sdk import TrainyardError

CLAIM = {
    "machine": "gpu-0", "platform": False, "bases": ["fixture-tiny-llm"], "devices": ["cpu"],
    "supports": {"adaptations": ["full", "lora"], "outputs": ["checkpoint", "lora"]},
}  # fmt: skip


@pytest.fixture(scope="module")
def org(stack: StackProcess) -> dict[str, httpx.Client]:
    """An org with a member and an executor."""
    name = f"rest-{secrets.token_hex(3)}"
    return {
        role: httpx.Client(
            base_url=stack.url, headers=bearer(stack.create_key(name, role)), timeout=60
        )
        for role in ("member", "executor")
    }


def test_a_known_path_with_another_method_is_405_with_allow(api: httpx.Client) -> None:
    answer = api.put("/v1/train/jobs")
    assert answer.status_code == 405 and reason(answer) == "method_not_allowed"
    assert answer.headers["allow"] == "GET, POST"
    assert api.delete("/v1/train/jobs/job_0123456789abcdef/cancel").headers["allow"] == "POST"


def test_an_empty_claim_is_204_and_a_lease_not_held_is_409(
    org: dict[str, httpx.Client],
) -> None:
    executor = org["executor"]
    empty = executor.post("/v1/train/jobs/claim", json={**CLAIM, "wait": 1})
    assert empty.status_code == 204 and empty.content == b""
    assert "content-type" not in empty.headers and "grpc-status" not in empty.headers

    body = {"base_model": "fixture-tiny-llm", "dataset": {"uri": "fixture:synthetic-tiny-v1"},
            "resources": {"machines": ["gpu-0"]}}  # fmt: skip
    job = org["member"].post("/v1/train/jobs", json=body).json()
    claimed = executor.post("/v1/train/jobs/claim", json={**CLAIM, "wait": 20})
    assert claimed.status_code == 200 and claimed.json()["task"]["job"] == job["id"]
    task = claimed.json()["task"]
    lost = executor.post(
        f"/v1/train/jobs/{job['id']}/events",
        json={"task": task["id"], "lease": "trl_not-the-lease", "events": []},
    )
    assert lost.status_code == 409 and reason(lost) == "lease_lost"
    held = executor.post(
        f"/v1/train/jobs/{job['id']}/events",
        json={"task": task["id"], "lease": task["lease"], "events": []},
    )
    assert held.status_code == 200 and held.json()["status"] == "preparing"


def test_refusals_of_a_create_carry_the_seeds_statuses(api: httpx.Client) -> None:
    key = f"k-{secrets.token_hex(3)}"
    body = {
        "base_model": "fixture-tiny-llm",
        "dataset": {"uri": "fixture:synthetic-tiny-v1"},
        "resources": {"budget": 100},
    }
    assert api.post("/v1/train/jobs", json={**body, "idempotency_key": key}).status_code == 200
    reused = api.post(
        "/v1/train/jobs",
        json={**body, "idempotency_key": key, "hyperparameters": {"max_steps": 3}},
    )
    assert reused.status_code == 409 and reason(reused) == "idempotency_key_reused"
    tagged = {**body, "dataset": {**body["dataset"], "tags": ["no-such-tag"]}}
    unknown_tag = api.post("/v1/train/jobs", json=tagged)
    assert (
        unknown_tag.status_code == 422
        and reason(unknown_tag) == "training_dataset_selection_invalid"
    )
    assert "no-such-tag" not in unknown_tag.text
    hp = {"num_train_epochs": 100, "max_seq_length": 2048, "per_device_train_batch_size": 1,
          "gradient_accumulation_steps": 1}  # fmt: skip
    duration = api.post("/v1/train/jobs", json={**body, "hyperparameters": hp})
    assert duration.status_code == 422 and reason(duration) == "training_duration_exceeds_limit"


def test_a_choice_refusal_names_the_field_and_the_supported_set(api: httpx.Client) -> None:
    body = {"base_model": "no-such-model", "dataset": {"uri": "fixture:synthetic-tiny-v1"}}
    answer = api.post("/v1/train/jobs", json=body)
    problem = answer.json()
    assert answer.status_code == 400 and reason(answer) == "unsupported_base"
    assert problem["fields"] == ["base_model"] and "fixture-tiny-llm" in problem["supported"]
    assert "no-such-model" not in answer.text


def test_an_upload_in_use_is_409(api: httpx.Client) -> None:
    rows = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
    sha256 = hashlib.sha256(rows).hexdigest()
    grant = api.post(
        "/v1/train/artifacts",
        json={"kind": "dataset", "name": "rows", "sha256": sha256, "size": len(rows)},
    ).json()
    httpx.put(grant["upload"]["url"], content=rows, headers=grant["upload"]["headers"])
    assert api.post(f"/v1/train/artifacts/{sha256}/confirm").status_code == 200
    job = {"base_model": "fixture-tiny-llm", "dataset": {"uri": f"artifact:{sha256}"},
           "resources": {"budget": 100}}  # fmt: skip
    assert api.post("/v1/train/jobs", json=job).status_code == 200
    busy = api.delete(f"/v1/train/artifacts/{sha256}")
    assert busy.status_code == 409 and reason(busy) == "in_use"


def test_empty_query_values_mean_unset_and_a_bad_value_is_named(api: httpx.Client) -> None:
    assert api.get("/v1/train/jobs?status=&page_size=").status_code == 200
    bad = api.get("/v1/train/jobs?page_size=many")
    assert bad.status_code == 400 and reason(bad) == "invalid_request"
    assert bad.json()["fields"] == ["page_size"] and "many" not in bad.text


def test_envoys_own_answers_are_problem_documents(api: httpx.Client) -> None:
    malformed = api.post(
        "/v1/train/jobs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and reason(malformed) == "malformed_json"
    nowhere = api.get("/v1/train/nowhere")
    assert nowhere.status_code == 404 and reason(nowhere) == "not_found"


def test_grpc_clients_keep_the_status_and_see_no_rest_face(
    stack: StackProcess, member_key: str
) -> None:
    with stack.channel() as channel:
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetJob(
                job_service_pb2.GetJobRequest(id="job_0123456789abcdef"),
                metadata=list(bearer(member_key).items()),
            )
    assert TrainyardError.from_rpc(caught.value).reason == "NOT_FOUND"
    assert not [k for k, _ in caught.value.trailing_metadata() if k.startswith("x-trainyard")]
