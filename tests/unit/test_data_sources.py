"""An org's data source: credentials sealed to the org and the name, and a request checked
field by field without its values coming back."""

from __future__ import annotations

import pytest

from services.core import errors
from services.jobs.data_sources import Sealer, _check
from trainyard.job.v1 import job_service_pb2

GOOD = {"name": "lake", "endpoint": "https://s3.example.com", "region": "eu-west-1",
        "access_key_id": "AKIAEXAMPLE", "secret_access_key": "wJalrXUtnFEMI/K7MDENG"}  # fmt: skip


def test_credentials_open_only_for_the_org_and_name_they_were_sealed_for() -> None:
    sealer = Sealer(b"m" * 32)
    sealed = sealer.seal("acme", "lake", "AKIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG")
    assert b"AKIAEXAMPLE" not in sealed and b"wJalrXUtnFEMI" not in sealed
    assert sealer.open("acme", "lake", sealed) == ("AKIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG")
    for org, name in (("globex", "lake"), ("acme", "pond")):
        with pytest.raises(errors.Unavailable):
            sealer.open(org, name, sealed)
    with pytest.raises(errors.Unavailable):
        Sealer(b"n" * 32).open("acme", "lake", sealed)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "Lake"),
        ("name", "lake\n"),
        ("endpoint", "ftp://s3.example.com"),
        ("endpoint", "https://user:pw@s3.example.com"),
        ("endpoint", "https://s3.example.com/?x=1"),
        ("endpoint", "https://s3.example.com:port"),
        ("endpoint", "https://s3.example.com\n"),
        ("endpoint", "https:///bucket"),
        ("region", "EU West"),
        ("access_key_id", "AKIA EXAMPLE"),
        ("secret_access_key", ""),
    ],
)
def test_a_bad_field_is_named_and_its_value_never_answered(field: str, value: str) -> None:
    request = job_service_pb2.CreateDataSourceRequest(**{**GOOD, field: value})
    with pytest.raises(errors.ValidationError) as caught:
        _check(request)
    assert caught.value.metadata == {"field": field}
    answered = caught.value.message + str(caught.value.metadata)
    for sent in (*GOOD.values(), value):
        if len(sent) > 4:
            assert sent not in answered


def test_a_whole_request_passes() -> None:
    _check(job_service_pb2.CreateDataSourceRequest(**GOOD))
