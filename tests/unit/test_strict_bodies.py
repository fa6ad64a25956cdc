"""A REST body bound to a request's `body` is read strictly: the request's own fields, an
unknown one refused naming it (when it is a plain name), a required one missing refused
naming it, and a gRPC client's typed request untouched."""

from __future__ import annotations

from typing import Any

import pytest

from services.core import errors
from services.core.validation import read_body
from trainyard.claim.v1 import claim_service_pb2
from trainyard.job.v1 import job_service_pb2
from trainyard.meter.v1 import meter_service_pb2


def rest(message: Any, body: dict[str, Any], **path: Any) -> Any:
    request = type(message)(**path)
    request.body.update(body)
    return request


def refused(request: Any) -> errors.ValidationError:
    with pytest.raises(errors.ValidationError) as caught:
        read_body(request)
    return caught.value


def test_a_body_is_read_into_the_request_with_its_path() -> None:
    request = rest(job_service_pb2.RetryJobRequest(), {"resume_from_checkpoint": True}, id="j")
    read = read_body(request)
    assert (read.id, read.resume_from_checkpoint, read.HasField("body")) == ("j", True, False)


def test_an_unknown_field_is_named_and_a_typo_sets_nothing() -> None:
    caught = refused(rest(meter_service_pb2.SetRateRequest(), {"meter": "m", "price": 1000}))
    assert caught.fields == [("price", "is not a known field")]
    assert "micro_cents" in caught.metadata["supported"].split(",")
    result = {"type": "result", "result": {"sha256": "0" * 64, "colour": 1}}
    nested = {"task": "t", "lease": "l", "events": [{"type": "metric", "step": 1}, result]}
    caught = refused(rest(claim_service_pb2.ReportTaskRequest(), nested, id="j"))
    assert caught.metadata["field"] == "events.result.colour"


@pytest.mark.parametrize("key", ["Price!", "ty_" + "a" * 40, "../etc", "a b"])
def test_a_key_that_is_not_a_plain_name_is_not_echoed(key: str) -> None:
    caught = refused(rest(job_service_pb2.CancelJobRequest(), {key: 1}, id="j"))
    assert caught.metadata["field"] == "body" and key not in str(caught)


def test_a_required_field_missing_is_named() -> None:
    caught = refused(rest(meter_service_pb2.SetRateRequest(), {"meter": "m"}))
    assert caught.fields == [("micro_cents", "is required")]


def test_a_body_may_not_set_what_the_path_set() -> None:
    caught = refused(rest(job_service_pb2.CancelJobRequest(), {"id": "other"}, id="j"))
    assert caught.metadata["field"] == "id"


def test_a_typed_request_passes_as_it_is() -> None:
    typed = meter_service_pb2.SetRateRequest(meter="m", micro_cents=5)
    assert read_body(typed) is typed
