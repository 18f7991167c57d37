"""The one retry policy: a bounded number of attempts, with a full-jitter pause before
each one after the first, never before the first nor after the last."""

from __future__ import annotations

import random

import pytest

from recall.retry import BACKOFF_CEILING_SECONDS, attempts, backoff_seconds


def test_a_loop_that_never_leaves_stops_after_its_attempts() -> None:
    # Given a loop that tries again every time
    slept: list[float] = []
    tried = []
    # When
    for attempt in attempts(5, 0.1, sleep=slept.append):
        tried.append(attempt)
    # Then: five attempts, four pauses (none before the first, none after the last)
    assert tried == [0, 1, 2, 3, 4]
    assert len(slept) == 4


def test_a_loop_that_succeeds_at_once_never_pauses() -> None:
    slept: list[float] = []
    for attempt in attempts(5, 0.1, sleep=slept.append):
        assert attempt == 0
        break
    assert slept == []


def test_each_pause_is_jittered_up_to_a_doubling_ceiling() -> None:
    # Given many runs of eight attempts
    random.seed(7)
    pauses: dict[int, list[float]] = {}
    for _ in range(300):
        slept: list[float] = []
        for _ in attempts(8, 0.05, sleep=slept.append):
            pass
        for index, pause in enumerate(slept):
            pauses.setdefault(index, []).append(pause)
    # Then the pause before attempt n is within [0, base * 2**(n-1)], capped, and spread
    for index, seen in pauses.items():
        ceiling = min(BACKOFF_CEILING_SECONDS, 0.05 * 2**index)
        assert all(0 <= pause <= ceiling for pause in seen)
        assert max(seen) > ceiling * 0.8 and min(seen) < ceiling * 0.2
    assert sorted(pauses) == list(range(7))


def test_no_attempt_at_all_when_none_are_allowed() -> None:
    slept: list[float] = []
    assert list(attempts(0, 0.1, sleep=slept.append)) == []
    assert slept == []


def test_the_backoff_never_passes_its_ceiling() -> None:
    assert all(backoff_seconds(30, 10.0) <= BACKOFF_CEILING_SECONDS for _ in range(100))


def test_without_a_sleep_given_it_pauses_with_time_sleep_as_it_is_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given time.sleep replaced after the policy was imported
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)
    # When three attempts run
    assert list(attempts(3, 0.1)) == [0, 1, 2]
    # Then both pauses went through the replacement
    assert len(slept) == 2
