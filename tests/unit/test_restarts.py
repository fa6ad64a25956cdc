"""The supervisor's restart rule for one part: a pause that doubles while the part keeps
exiting, reset once it stayed up, and an end once it exits too often in a while."""

from __future__ import annotations

from infra.stack import RestartPolicy, Restarts

POLICY = RestartPolicy(first_delay=0.5, max_delay=30.0, stable_after=60.0, limit=5, window=300.0)


def test_the_pause_doubles_while_the_part_keeps_exiting_and_gives_up_past_the_limit() -> None:
    part = Restarts(POLICY, now=0.0)
    now, pauses = 0.0, []
    for _ in range(5):
        now += 1.0
        pause = part.exited(now)
        assert pause is not None
        pauses.append(pause)
        now += pause
        part.started(now)
    assert pauses == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert part.exited(now + 1.0) is None


def test_the_pause_is_capped() -> None:
    part = Restarts(RestartPolicy(limit=100), now=0.0)
    pauses = [part.exited(float(t)) for t in range(1, 10)]
    assert pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_part_that_stayed_up_starts_again_at_the_first_pause() -> None:
    part = Restarts(POLICY, now=0.0)
    assert [part.exited(t) for t in (1.0, 2.0, 4.0)] == [0.5, 1.0, 2.0]
    part.started(5.0)
    assert part.exited(5.0 + POLICY.stable_after) == POLICY.first_delay


def test_exits_older_than_the_window_no_longer_count() -> None:
    part = Restarts(POLICY, now=0.0)
    for t in range(1, 6):
        assert part.exited(float(t)) is not None
    assert part.exited(6.0) is None
    # Five minutes on, the old exits have aged out.
    assert part.exited(6.0 + POLICY.window) is not None
