"""Publishing's pure rules (HIP-1333 §6): a route's bounds, the questions it claims, and the
revision that names the platform's list."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core import errors
from services.core.object_tables import PublicationRow
from services.jobs.publishing import check_route, claims, revision_of, route_proto
from trainyard.job.v1 import publication_pb2


def route(keys: list[str], **options: tuple[str, list[str]]) -> publication_pb2.Route:
    out = publication_pb2.Route(keys=keys)
    for key, (kind, labels) in options.items():
        out.options[key].CopyFrom(publication_pb2.RouteOption(type=kind, labels=labels))
    return out


def test_a_route_within_the_rules_is_kept_as_sent_and_reads_back() -> None:
    sent = route(["topic", "mood"], topic=("choice", ["billing", "bug", "other"]))
    kept = check_route(sent)
    assert kept == {
        "keys": ["topic", "mood"],
        "options": {"topic": {"type": "choice", "labels": ["billing", "bug", "other"]}},
    }
    assert route_proto(kept) == sent
    # 64 keys of 256 bytes each (multi-byte characters counted in bytes) are the most.
    check_route(route([f"{i:02d}" + "é" * 127 for i in range(64)]))


MARK = "SECRET-7f3a"
# What a caller may send: empty, or marked so an echo of it is found.
SENT = st.one_of(st.just(""), st.text(max_size=260).map(lambda t: MARK + t))


@given(
    st.lists(SENT, max_size=70),
    st.one_of(st.sampled_from(["choice", "score", "noul"]), SENT),
    st.lists(SENT, max_size=4),
)
def test_no_refusal_of_a_route_carries_what_was_sent(
    keys: list[str], kind: str, labels: list[str]
) -> None:
    sent = route(keys)
    if keys:
        sent.options[keys[-1]].CopyFrom(publication_pb2.RouteOption(type=kind, labels=labels))
    try:
        check_route(sent)
    except errors.ValidationError as exc:
        assert exc.metadata["field"] in ("route.keys", "route.options")
        assert MARK not in str(exc.to_status()) and MARK not in exc.message


def test_a_route_claims_each_bare_key_whole_and_each_narrowed_key_one_question() -> None:
    kept = check_route(route(["topic", "intent"], intent=("choice", ["buy", "sell"])))
    assert claims(kept) == {("key", "topic"), ("question", "intent", "choice", ("buy", "sell"))}
    # The same labels in another order, or under another type, are another question.
    reordered = check_route(route(["intent"], intent=("choice", ["sell", "buy"])))
    scored = check_route(route(["intent"], intent=("score", ["buy", "sell"])))
    assert not claims(kept) & claims(reordered) and not claims(kept) & claims(scored)
    # A key answered whole does not claim the one question another narrows it to.
    assert not claims(check_route(route(["intent"]))) & claims(kept) - {("key", "topic")}


def row(name: str, sha256: str = "a" * 64, **kw: object) -> PublicationRow:
    values: dict[str, object] = {
        "org": "acme", "name": name, "job_id": "job_0123456789abcdef", "sha256": sha256,
        "base_sha256": "e" * 64, "kind": "capability", "form": "full",
        "route": {"keys": ["topic"], "options": {}}, "forced": False,
        "publish_time": dt.datetime.now(dt.UTC),
    }  # fmt: skip
    values.update(kw)
    return PublicationRow(**values)


def test_the_revision_moves_with_what_the_platform_installs_and_nothing_else() -> None:
    base = [row("triage"), row("spam", "b" * 64, org="globex")]
    revision = revision_of(base)
    assert len(revision) == 64 and revision == revision_of(base[::-1])
    # Publishing the same again (another time, another job with the same bytes, forced):
    # the same list.
    again = [row("triage", job_id="job_fedcba9876543210", forced=True), base[1]]
    assert revision_of(again) == revision
    for moved in (
        [row("triage", "c" * 64), base[1]],  # replaced
        [row("renamed"), base[1]],  # moved to another name
        [*base, row("third")],  # published
        [row("triage", form="head"), base[1]],
        [row("triage", route={"keys": ["mood"], "options": {}}), base[1]],
    ):
        assert revision_of(moved) != revision


@pytest.mark.parametrize("kind", ["choice", "score", "noul"])
def test_each_question_type_is_accepted(kind: str) -> None:
    assert check_route(route(["k"], k=(kind, ["x"])))["options"]["k"]["type"] == kind
