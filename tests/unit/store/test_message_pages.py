"""A page of messages stops at its byte budget, whatever ``limit`` asked for, and its
cursor resumes right after the last message it returned, in its own thread only."""

from __future__ import annotations

from typing import Any

import pytest

from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.errors import Invalid
from recall.settings import Settings
from recall.store.cursors import (
    decode_cursor,
    encode_cursor,
)
from recall.store.messages import MessageStore, message_item

AT = "2026-11-30T00:00:00.000Z"


class Thread:
    """A thread's items, newest first, as a query without a start key reads them."""

    def __init__(self, count: int, chars: int) -> None:
        self.items = [
            message_item(
                "u#p#c",
                Message(message_id=new_id(), role="user", content="x" * chars, created_at=AT),
            )
            for _ in range(count)
        ][::-1]
        self.queries: list[dict[str, Any]] = []

    def query(self, **params: Any) -> dict[str, Any]:
        self.queries.append(params)
        return {"Items": self.items[: params["Limit"]]}


def store(thread: Thread, page_bytes: int) -> MessageStore:
    return MessageStore(Settings(messages_page_max_bytes=page_bytes), client=thread)  # type: ignore[arg-type]


def test_a_page_of_long_messages_stops_at_its_byte_budget() -> None:
    thread = Thread(count=10, chars=1_000)
    messages, cursor = store(thread, 3_500).page("u", "p", "c", 200, None)
    assert len(messages) == 3
    assert cursor is not None
    assert decode_cursor(cursor, {"conversationId", "messageId"}) == {
        "conversationId": "c",
        "messageId": messages[0].message_id,
    }


def test_one_message_over_the_budget_is_still_a_page() -> None:
    thread = Thread(count=2, chars=5_000)
    messages, cursor = store(thread, 1_000).page("u", "p", "c", 200, None)
    assert len(messages) == 1 and cursor is not None


def test_a_page_that_fits_and_ends_the_thread_has_no_cursor() -> None:
    thread = Thread(count=3, chars=10)
    messages, cursor = store(thread, 1_000_000).page("u", "p", "c", 200, None)
    assert len(messages) == 3 and cursor is None


@pytest.mark.parametrize(
    "cursor",
    [
        encode_cursor({"conversationId": "other", "messageId": new_id()}),
        encode_cursor({"conversationId": "c", "messageId": "not-an-id"}),
        encode_cursor({"messageId": new_id()}),
        encode_cursor({"conversationId": "c", "messageId": "\U0001f600" * 300}),
    ],
    ids=["another-thread", "not-a-message-id", "the-old-shape", "over-a-sort-key"],
)
def test_a_cursor_for_another_thread_or_edited_is_a_422_and_never_queried(cursor: str) -> None:
    thread = Thread(count=3, chars=10)
    with pytest.raises(Invalid):
        store(thread, 1_000_000).page("u", "p", "c", 2, cursor)
    assert thread.queries == []


@pytest.mark.parametrize(
    "value",
    ["x" * 1_025, "\U0001f600" * 257, "half a pair \ud800", ""],
    ids=["long", "wide", "surrogate", "empty"],
)
def test_a_cursor_value_no_key_could_hold_is_refused_before_any_list_reads_it(value: str) -> None:
    with pytest.raises(Invalid):
        decode_cursor(encode_cursor({"messageId": value}), {"messageId"})
