"""Keeping objects and a waiting job's place: the one "will it expire, and why not" rule
(`object_tables.fate`), an extension's bounds, and the queue's start-time simulation."""

from __future__ import annotations

import datetime as dt

import pytest

from services.artifacts.keeping import extended_expiry, greatest_ttl
from services.core import errors
from services.core.object_tables import (
    JobArtifactRow,
    ObjectRow,
    PublicationRow,
    fate,
    readable,
)
from services.core.store import Store
from services.core.tables import JobRow
from services.jobs.expected import Run
from services.jobs.queue import Slot, Waiting, remaining_seconds, run_seconds, start_in

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
PAST, FUTURE = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=3)
ORG = "acme"


def obj(digit: str, *, expires: dt.datetime | None = PAST, **kw: object) -> ObjectRow:
    org = str(kw.pop("org", ORG))
    return ObjectRow(
        org=org,
        sha256=digit * 64,
        id=f"obj_{org}_{digit}",
        size=1000,
        kind=kw.pop("kind", "checkpoint"),
        name="o",
        status="stored",
        job_id="",
        retention_policy=kw.pop("policy", "standard"),
        meta={},
        create_time=NOW,
        expires_at=expires,
        pinned=kw.pop("pinned", False),
    )


def job(number: int, status: str, **kw: str) -> JobRow:
    return JobRow(
        id=f"job_{number:016x}",
        org=kw.pop("org", ORG),
        project="default",
        number=number,
        status=status,
        spec={},
        plan={},
        create_time=NOW,
        update_time=NOW,
        **kw,
    )


def made(session, job_row: JobRow, row: ObjectRow, kind: str = "checkpoint") -> None:  # type: ignore[no-untyped-def]
    session.add(
        JobArtifactRow(
            org=row.org, job_id=job_row.id, sha256=row.sha256, kind=kind, name="o", create_time=NOW
        )
    )


def test_an_expired_object_nothing_keeps_is_taken_and_a_live_one_is_not(store: Store) -> None:
    with store.unit() as session:
        gone, live, never = obj("a"), obj("b", expires=FUTURE), obj("c", expires=None)
        session.add_all([gone, live, never])
        session.flush()
        assert fate(session, gone, NOW) == fate(session, gone, NOW)
        assert fate(session, gone, NOW).expired(NOW) and not readable(session, gone, NOW)
        assert fate(session, live, NOW).expire_time == FUTURE
        assert not fate(session, live, NOW).expired(NOW) and readable(session, live, NOW)
        # ... until its time comes: the scan for what is about to expire asks this.
        assert fate(session, live, NOW).expired(FUTURE)
        assert fate(session, never, NOW).expire_time is None
        assert not fate(session, never, NOW).expired(FUTURE)
        assert (fate(session, gone, NOW).kept_by, readable(session, None, NOW)) == ("", False)


def test_a_pinned_object_never_expires_and_says_so(store: Store) -> None:
    with store.unit() as session:
        pinned = obj("a", pinned=True)
        session.add(pinned)
        session.flush()
        kept = fate(session, pinned, NOW)
        assert (kept.expire_time, kept.kept_by) == (None, "pinned")
        assert not kept.expired(FUTURE) and readable(session, pinned, NOW)
        pinned.pinned = False  # unpinned: its own expiry applies again
        assert fate(session, pinned, NOW).expired(NOW) and not readable(session, pinned, NOW)


def test_a_published_object_is_kept(store: Store) -> None:
    with store.unit() as session:
        row = obj("a")
        session.add(row)
        session.add(
            PublicationRow(
                org=ORG, name="prod", job_id="job_1", sha256=row.sha256, base_sha256="",
                kind="lora", form="full", publish_time=NOW,
            )
        )  # fmt: skip
        session.flush()
        assert fate(session, row, NOW).kept_by == "published" and readable(session, row, NOW)


def test_an_object_a_live_job_reads_is_kept_until_the_job_ends(store: Store) -> None:
    with store.unit() as session:
        upload, adapter = obj("a", kind="dataset"), obj("b", kind="lora")
        reader = job(1, "running", reads_sha256=upload.sha256, from_sha256=adapter.sha256)
        session.add_all([upload, adapter, reader])
        session.flush()
        assert fate(session, upload, NOW).kept_by == f"job:{reader.id}"
        assert fate(session, adapter, NOW).kept_by == f"job:{reader.id}"
        reader.status = "succeeded"
        session.flush()
        assert fate(session, upload, NOW).expired(NOW)


def test_an_object_a_live_objects_provenance_names_is_kept(store: Store) -> None:
    """The snapshot a live checkpoint was trained on, and the checkpoint a live adapter was
    started from, are kept by them; an expired object keeps nothing, and another org's
    never counts."""
    with store.unit() as session:
        snapshot, checkpoint = obj("a", kind="snapshot"), obj("b")
        adapter = obj("c", kind="lora", expires=FUTURE)
        trained = job(1, "succeeded", dataset_sha256=snapshot.sha256)
        started = job(2, "succeeded", from_sha256=checkpoint.sha256)
        session.add_all([snapshot, checkpoint, adapter, trained, started])
        session.flush()
        made(session, trained, snapshot, "snapshot")  # what it trained on: no provenance
        made(session, trained, checkpoint)
        made(session, started, adapter, "lora")
        session.flush()
        # The adapter lives; the checkpoint it started from is kept by it, and the snapshot
        # the checkpoint was trained on by the checkpoint, through the chain.
        assert fate(session, checkpoint, NOW).kept_by == f"object:{adapter.sha256}"
        assert fate(session, snapshot, NOW).kept_by == f"object:{checkpoint.sha256}"
        adapter.expires_at = PAST
        session.flush()
        assert fate(session, checkpoint, NOW).expired(NOW)
        assert fate(session, snapshot, NOW).expired(NOW)
        # Another org's job and object naming the same bytes keep nothing here.
        theirs_job = job(3, "succeeded", org="globex", from_sha256=checkpoint.sha256)
        theirs = obj("c", org="globex", expires=FUTURE)
        session.add_all([theirs_job, theirs])
        session.flush()
        made(session, theirs_job, theirs, "lora")
        session.flush()
        assert fate(session, checkpoint, NOW).expired(NOW)


def test_an_extension_moves_expiry_later_within_its_class() -> None:
    row = obj("a", expires=FUTURE)  # standard: 90 days at most
    assert greatest_ttl("standard") == 90 * 86_400 and greatest_ttl("default") == 90 * 86_400
    assert greatest_ttl("ephemeral") == 7 * 86_400 and greatest_ttl("extended") == 3650 * 86_400
    assert extended_expiry(row, 30 * 86_400, NOW) == NOW + dt.timedelta(days=30)
    assert extended_expiry(row, 3 * 86_400, NOW) == FUTURE  # as late as it was: allowed
    for ttl, why, extra in [
        (86_400, "would make the object expire sooner than it does", {}),
        (0, "must be at least 1", {}),
        (-5, "must be at least 1", {}),
        (90 * 86_400 + 1, "is longer than its retention class keeps an object", {"max": "7776000"}),
    ]:
        with pytest.raises(errors.ValidationError) as caught:
            extended_expiry(row, ttl, NOW)
        assert caught.value.reason == "INVALID_REQUEST"
        assert caught.value.fields == [("ttl_seconds", why)]
        assert caught.value.metadata == {"field": "ttl_seconds", **extra}
    # An object that never expires cannot be extended: any TTL would shorten it.
    with pytest.raises(errors.ValidationError):
        extended_expiry(obj("b", expires=None), 86_400, NOW)
    # An object past its expiry (kept by something) may be given any TTL in bounds.
    assert extended_expiry(obj("c"), 3600, NOW) == NOW + dt.timedelta(hours=1)
    # Its class bounds it: an ephemeral object's greatest TTL is a week.
    with pytest.raises(errors.ValidationError) as caught:
        extended_expiry(obj("d", policy="ephemeral"), 8 * 86_400, NOW)
    assert caught.value.metadata["max"] == str(7 * 86_400)


# -- the queue's simulation -----------------------------------------------------------------


def test_a_job_with_nothing_ahead_starts_when_the_first_slot_frees() -> None:
    assert start_in([Slot("e1", 40.0)], []) == 40.0
    assert start_in([Slot("e1", 40.0), Slot("e1", 0.0)], []) == 0.0
    assert start_in([], []) is None  # no executor can take it


def test_the_jobs_ahead_fill_the_slots_in_claim_order() -> None:
    both = frozenset({"e1", "e2"})
    # e1 frees in 10 s, e2 in 30 s; the first job ahead (20 s) takes e1 (free at 30), the
    # second (50 s) takes e2 or e1, both free at 30, and ends at 80; the job starts at 30.
    slots = [Slot("e1", 10.0), Slot("e2", 30.0)]
    assert start_in(slots, [Waiting(20.0, both), Waiting(50.0, both)]) == 30.0
    # Three ahead on one slot: they run one after another.
    one = [Slot("e1", 5.0)]
    ahead = [Waiting(10.0, frozenset({"e1"}))] * 3
    assert start_in(one, ahead) == 35.0


def test_a_task_ahead_only_other_executors_take_holds_no_slot_of_these() -> None:
    slots = [Slot("e1", 0.0), Slot("e2", 0.0)]
    # The first task ahead runs on e2 alone, so e1 stays free.
    assert start_in(slots, [Waiting(100.0, frozenset({"e2"}))]) == 0.0
    assert (
        start_in(slots, [Waiting(100.0, frozenset({"e2"})), Waiting(7.0, frozenset({"e1"}))]) == 7.0
    )
    assert start_in(slots, [Waiting(100.0, frozenset({"e9"}))]) == 0.0


def test_a_run_lasts_as_recent_runs_did_or_as_the_profile_says() -> None:
    runs = [Run(10.0, 10, 25.0), Run(30.0, 10, 40.0), Run(20.0, 10, 30.0)]
    # Median 2 s a step and a median 10 s around the loop (load, save, upload).
    assert run_seconds(5, runs, 0.5, 30.0) == (20.0, True)
    assert run_seconds(5, [], 0.5, 30.0) == (32.5, False)


def test_a_running_task_ends_after_its_remaining_steps_at_its_own_pace() -> None:
    # 60 of 100 steps at 0.5 s a step, reported 4 s ago, 5 s to save and upload.
    common = {"since_report": 4.0, "post_seconds": 5.0, "whole_seconds": 90.0, "since_claim": 50.0}
    assert remaining_seconds(planned_steps=100, step=60, step_seconds=0.5, **common) == 21.0
    # Past its estimate: only what follows the loop is left.
    late = {**common, "since_report": 100.0}
    assert remaining_seconds(planned_steps=100, step=60, step_seconds=0.5, **late) == 5.0
    # No step reported yet (loading the base): its whole run less the time since the claim.
    assert remaining_seconds(planned_steps=100, step=0, step_seconds=None, **common) == 40.0
    assert (
        remaining_seconds(
            planned_steps=100, step=0, step_seconds=None, **{**common, "since_claim": 500.0}
        )
        == 0.0
    )
