"""A key's limits as pure logic: which projects and bases it may use, which keys it may hand
out and manage, when it is expired, and how the trail's and the CLI's times read."""

from __future__ import annotations

import datetime as dt

import click
import pytest

from services.core import context, errors
from services.core.auth import ApiKey, Principal
from services.jobs.create import check_scope
from services.jobs.org.keys import within
from services.jobs.org.trail import parse_time
from trainyard import cli_org
from trainyard.job.v1 import job_pb2

NOW = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
LIMITED = Principal(
    "key_aaaaaaaaaaaaaaaa", "acme", "admin", "acme", projects=("bots", "web"), bases=("b1",)
)


def row(**fields: object) -> ApiKey:
    values = {"id": "key_bbbbbbbbbbbbbbbb", "org": "acme", "role": "member", "create_time": NOW}
    return ApiKey(**{**values, **fields})


def test_a_key_without_limits_sees_every_project_and_base() -> None:
    free = Principal("key_cccccccccccccccc", "acme", "member")
    assert not free.limited and free.sees_project("anything")
    check_scope(free, job_pb2.Job(project="x", base_model="any"))


@pytest.mark.parametrize(
    ("project", "base", "field"),
    [("other", "b1", "project"), ("", "b1", "project"), ("bots", "b2", "base_model")],
)
def test_a_job_outside_the_keys_limits_is_refused_naming_the_field(
    project: str, base: str, field: str
) -> None:
    with pytest.raises(errors.PermissionDenied) as refused:
        check_scope(LIMITED, job_pb2.Job(project=project, base_model=base))
    assert refused.value.metadata == {"field": field}
    assert refused.value.fields[0][0] == field
    check_scope(LIMITED, job_pb2.Job(project="web", base_model="b1"))


def test_outside_a_request_every_project_is_seen_and_inside_the_keys_only() -> None:
    assert context.sees_project("other")
    token = context.principal_var.set(LIMITED)
    try:
        assert context.sees_project("bots") and not context.sees_project("other")
    finally:
        context.principal_var.reset(token)


def test_a_key_is_expired_from_its_expire_time_and_revoked_before_all() -> None:
    assert row().status(NOW) == "active"
    assert row(expire_time=NOW + dt.timedelta(seconds=1)).status(NOW) == "active"
    assert row(expire_time=NOW).status(NOW) == "expired"
    assert row(expire_time=NOW, revoke_time=NOW).status(NOW) == "revoked"


@pytest.mark.parametrize(
    ("fields", "inside"),
    [({"projects": ["bots"], "bases": ["b1"]}, True),
     ({"projects": ["bots", "web"], "bases": ["b1"]}, True),
     ({"projects": ["bots", "ops"], "bases": ["b1"]}, False),
     ({"projects": None, "bases": ["b1"]}, False),  # every project: wider than the caller
     ({"projects": ["bots"], "bases": None}, False)],
)  # fmt: skip
def test_a_limited_key_manages_only_keys_within_its_limits(
    fields: dict[str, object], inside: bool
) -> None:
    assert within(LIMITED, row(**fields)) is inside


def test_caps_and_lifetimes_bound_what_a_limited_key_manages() -> None:
    capped = Principal(
        "key_dddddddddddddddd", "acme", "admin", spend_cap_cents=100, expire_time=NOW
    )
    assert within(capped, row(monthly_spend_cap=100, expire_time=NOW))
    assert not within(capped, row(monthly_spend_cap=101, expire_time=NOW))
    assert not within(capped, row(expire_time=NOW))  # no cap: wider
    assert not within(capped, row(monthly_spend_cap=5))  # never expires: wider
    assert within(capped, row(id=capped.key_id))  # itself, always


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2026-12-01T00:00:00Z", dt.datetime(2026, 12, 1, tzinfo=dt.UTC)),
     ("2026-12-01T02:00:00+02:00", dt.datetime(2026, 12, 1, tzinfo=dt.UTC)), ("", None)],
)  # fmt: skip
def test_the_trails_times_read_rfc_3339(value: str, expected: dt.datetime | None) -> None:
    assert parse_time("start_time", value) == expected


@pytest.mark.parametrize("value", ["2026-12-01", "2026-12-01T00:00:00", "soon", "9" * 50])
def test_a_time_without_its_offset_is_refused_without_echo(value: str) -> None:
    with pytest.raises(errors.ValidationError) as refused:
        parse_time("end_time", value)
    assert refused.value.metadata["field"] == "end_time" and value not in refused.value.message


def test_the_cli_reads_a_span_back_or_a_time() -> None:
    back = dt.datetime.fromisoformat(cli_org._when("2h", "--since"))
    assert abs((dt.datetime.now(dt.UTC) - back) - dt.timedelta(hours=2)) < dt.timedelta(minutes=1)
    assert cli_org._when("2026-12-01T00:00:00", "--since") == "2026-12-01T00:00:00+00:00"
    with pytest.raises(click.BadParameter):
        cli_org._when("yesterday", "--since")
