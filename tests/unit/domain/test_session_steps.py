"""What one turn does to its member's sessions (``session_step``): it goes on with the
session they are in until the idle time has passed since its last turn, then starts the
next one and ends that one, unless the prune job ended it already."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from recall.domain import clock
from recall.domain.sessions import SessionTally, session_step

IDLE = timedelta(hours=24)
START = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
RUNNING = SessionTally(clock.stamp(START), clock.stamp(START + timedelta(hours=2)), 3, 300)


def test_a_members_first_turn_starts_a_session_and_ends_none() -> None:
    step = session_step(None, False, START, 1, 50, IDLE)
    assert step.started and step.ends is None
    assert step.tally == SessionTally(clock.stamp(START), clock.stamp(START), 1, 50)


def test_a_turn_a_moment_before_the_idle_time_adds_to_the_session() -> None:
    at = START + timedelta(hours=2) + IDLE - timedelta(milliseconds=1)
    step = session_step(RUNNING, False, at, 1, 50, IDLE)
    assert not step.started and step.ends is None
    assert step.tally == SessionTally(RUNNING.started_at, clock.stamp(at), 4, 350)


def test_a_turn_at_the_idle_time_starts_the_next_session_and_ends_the_last() -> None:
    at = START + timedelta(hours=2) + IDLE
    step = session_step(RUNNING, True, at, 1, 50, IDLE)
    assert step.started and step.ends == RUNNING
    assert step.tally == SessionTally(clock.stamp(at), clock.stamp(at), 1, 50)
    assert step.carried  # what it read came from last month's item


def test_a_session_the_job_ended_is_not_ended_again() -> None:
    step = session_step(RUNNING, False, START + 2 * IDLE, 1, 50, IDLE, previous_ended=True)
    assert step.started and step.ends is None


def test_a_failed_reply_counts_its_tokens_but_no_turn() -> None:
    step = session_step(RUNNING, False, START + timedelta(hours=3), 0, 20, IDLE)
    assert (step.tally.turns, step.tally.tokens) == (3, 320)


def test_a_session_ends_its_idle_time_after_its_last_turn() -> None:
    assert RUNNING.ends_at(IDLE) == clock.stamp(START + timedelta(hours=2) + IDLE)
