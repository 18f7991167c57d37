"""Pure rules of threads, roles and the active window."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recall.domain.access import Role, require
from recall.domain.conversations import Period, period_of, title_from_message
from recall.domain.ids import is_id, new_id
from recall.domain.messages import Message
from recall.domain.window import next_window, trimmed, window_of
from recall.errors import Forbidden
from recall.settings import Settings

NOW = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("updated_at", "period"),
    [
        ("2026-11-29T00:00:00.000Z", Period.TODAY),
        ("2026-11-28T23:59:59.000Z", Period.YESTERDAY),
        ("2026-11-28T00:00:00.000Z", Period.YESTERDAY),
        ("2026-11-27T23:59:59.000Z", Period.PREVIOUS_7_DAYS),
        ("2026-11-22T12:00:00.000Z", Period.PREVIOUS_7_DAYS),
        ("2026-10-30T12:00:00.000Z", Period.PREVIOUS_30_DAYS),
        ("2026-10-29T12:00:00.000Z", Period.OLDER),
    ],
)
def test_each_thread_gets_the_period_it_was_last_updated_in(
    updated_at: str, period: Period
) -> None:
    assert period_of(updated_at, NOW) is period


def test_a_title_is_the_first_message_on_one_line_trimmed_at_a_word() -> None:
    assert title_from_message("  Make the\nheader   dark ", 80) == "Make the header dark"
    long = title_from_message("word " * 40, 30)
    assert len(long) <= 30
    assert long.endswith("…")
    assert title_from_message("   ", 80) == "New conversation"


def test_no_role_and_too_low_a_role_are_both_forbidden() -> None:
    with pytest.raises(Forbidden):
        require(None, Role.VIEWER)
    with pytest.raises(Forbidden):
        require(Role.VIEWER, Role.EDITOR)
    assert require(Role.OWNER, Role.EDITOR) is Role.OWNER


def test_ids_increase_even_within_one_millisecond() -> None:
    ids = [new_id() for _ in range(1000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 1000
    assert all(is_id(value) for value in ids)


def _message(role: str, n: int, status: str = "complete") -> Message:
    return Message.model_validate(
        {
            "message_id": new_id(),
            "role": role,
            "content": f"m{n}",
            "status": status,
            "created_at": "2026-11-29T00:00:00.000Z",
        }
    )


def _turns(count: int, evict_step: int) -> list[list[Message]]:
    """The window after each of ``count`` turns, a window of 20 dropping ``evict_step``."""
    windows: list[list[Message]] = [[]]
    for n in range(count):
        added = [_message("user", n), _message("assistant", n)]
        windows.append(next_window(windows[-1], added, 20, 300_000, evict_step))
    return windows[1:]


def test_the_window_keeps_at_least_twenty_messages_and_drops_ten_at_a_time() -> None:
    windows = _turns(30, evict_step=10)
    # it grows to 30, then drops back to the newest 20
    assert [len(w) for w in windows[8:18]] == [18, 20, 22, 24, 26, 28, 30, 20, 22, 24]
    assert [m.content for m in windows[15]] == [f"m{n}" for n in range(6, 16) for _ in (0, 1)]
    assert min(len(w) for w in windows[10:]) == 20


def test_the_window_starts_at_the_same_message_for_several_turns() -> None:
    starts = [w[0].content for w in _turns(40, evict_step=10)]
    moved_at = [turn for turn in range(2, 41) if starts[turn - 1] != starts[turn - 2]]
    assert moved_at == [16, 22, 28, 34, 40]  # once every six turns, not every turn


def test_without_an_eviction_step_the_window_slides_every_turn() -> None:
    windows = _turns(15, evict_step=0)
    assert [m.content for m in windows[-1]] == [f"m{n}" for n in range(5, 15) for _ in (0, 1)]


def test_the_window_still_fits_its_byte_budget_between_drops() -> None:
    window: list[Message] = []
    for n in range(10):
        added = [_message("user", n).model_copy(update={"content": "x" * 1000})]
        window = next_window(window, added, 20, 4000, 10)
    assert len(window) == 3


def test_tool_rounds_and_failed_replies_stay_out_of_the_window() -> None:
    added = [_message("user", 1), _message("tool", 1), _message("assistant", 1, "error")]
    assert [m.role for m in next_window([], added, 20, 300_000, 10)] == ["user"]


def test_the_window_also_fits_a_byte_budget() -> None:
    big = [_message("user", n).model_copy(update={"content": "x" * 1000}) for n in range(10)]
    assert len(trimmed(big, 20, 4000)) == 3


def test_the_window_read_back_from_its_start_is_the_window_the_turn_kept() -> None:
    # Given forty turns, each with a tool round, saving only the window's first message id
    page = Settings().window_page_messages
    saved: list[Message] = []
    window: list[Message] = []
    start = None
    for n in range(40):
        added = [_message("user", n), _message("tool", n), _message("assistant", n)]
        saved += added
        kept = next_window(window, added, 20, 300_000, 10)
        start = kept[0].message_id
        # When the next turn reads its page of newest messages and cuts it at that start
        window = window_of(saved[-page:], start, None, 20, 300_000)
        # Then it holds exactly what the turn kept
        assert window == kept


def test_a_window_starts_after_the_clear_context_marker() -> None:
    before = [_message("user", 0), _message("assistant", 0)]
    marker = new_id()
    after = [_message("user", 1), _message("assistant", 1)]
    start = before[0].message_id
    assert [m.content for m in window_of(before + after, start, marker, 20, 300_000)] == [
        "m1",
        "m1",
    ]


def test_a_thread_without_a_window_start_takes_the_newest_messages() -> None:
    saved = [_message("user", n) for n in range(10)]
    assert window_of(saved, None, None, 3, 300_000) == saved[-3:]
