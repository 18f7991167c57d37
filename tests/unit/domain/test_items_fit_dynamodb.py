"""What grows with client input or model output is measured by DynamoDB's size rules and
trimmed to fit, so no item reaches DynamoDB's 400 KB."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from recall.domain.ids import new_id
from recall.domain.messages import Message
from recall.domain.prompt import ModelReply, ToolCall, ToolResult
from recall.domain.sizes import ITEM_MAX_BYTES, item_size, stored_size
from recall.domain.turns import Exchange, ToolRound, fitted, turn_messages
from recall.domain.window import trimmed, window_of
from recall.settings import Settings
from recall.store.dynamodb import to_item
from tests.integration.aws_limits import item_size as wire_size

AT = "2026-11-30T00:00:00.000Z"
GRIN = "\U0001f600"
BOUNDED = settings(max_examples=40, deadline=None, derandomize=True)


def window_size(window: list[Message]) -> int:
    """The bytes DynamoDB counts for the window's messages as a list of maps: each message
    with its tool calls, usage and every other field it has."""
    return stored_size([message.model_dump(exclude_none=True) for message in window])


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**37), max_value=10**37)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)


@BOUNDED
@given(st.dictionaries(st.text(min_size=1, max_size=8), PLAIN, max_size=5))
def test_the_domain_counts_an_item_as_dynamodb_does(values: dict[str, Any]) -> None:
    stored = {name: value for name, value in values.items() if value is not None}
    assert item_size(stored) == wire_size(to_item(stored))


def message(role: str, content: str, **fields: Any) -> Message:
    return Message(message_id=new_id(), role=role, content=content, created_at=AT, **fields)


def test_a_four_byte_character_counts_four_bytes_in_the_window() -> None:
    small, big = message("user", "a"), message("user", GRIN * 1000)
    assert window_size([big]) - window_size([small]) == 4 * 1000 - 1


def test_the_window_keeps_the_newest_messages_that_fit_its_bytes() -> None:
    window = [message("user", GRIN * 16_000) for _ in range(20)]
    kept = trimmed(window, 20, 300_000)
    assert kept == window[-len(kept) :]
    assert window_size(kept) <= 300_000 < window_size(window[-len(kept) - 1 :])
    assert len(kept) == 4  # 64 KB each: four fit in 300 KB


def test_a_window_read_from_its_start_keeps_the_same_bytes_as_a_trimmed_one() -> None:
    saved = [message("user", GRIN * 16_000) for _ in range(20)]
    start = saved[0].message_id
    assert window_of(saved, start, None, 20, 300_000) == trimmed(saved, 20, 300_000)


def test_the_window_counts_the_tool_calls_its_replies_carry() -> None:
    call = ToolCall(id="t", name="save_preference", input={"value": "x" * 50_000})
    replies = [message("assistant", "ok", tool_calls=[call]) for _ in range(10)]
    assert window_size(trimmed(replies, 20, 300_000)) <= 300_000
    assert len(trimmed(replies, 20, 300_000)) < 10


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    content=st.text(max_size=3).map(lambda t: t * 30_000),
    calls=st.integers(min_value=0, max_value=100),
    big_input=st.booleans(),
)
def test_a_message_the_model_made_is_cut_to_its_budget_whatever_it_holds(
    content: str, calls: int, big_input: bool
) -> None:
    value = GRIN * 20_000 if big_input else "dark"
    made = message(
        "assistant",
        content,
        tool_calls=[
            ToolCall(id=f"t{n}", name="save_preference", input={"key": "tone", "value": value})
            for n in range(calls)
        ],
        tool_results=[ToolResult(tool_call_id=f"t{n}", content="x" * 2_000) for n in range(calls)],
        error="\x00" * 70_000,
    )
    cut = fitted(made, 60_000)
    assert len(json.dumps(cut.model_dump(mode="json", exclude_none=True))) <= 60_000
    assert cut.content == content[: len(cut.content)]
    assert item_size(cut.model_dump(exclude_none=True)) <= 60_000


def test_a_message_that_fits_is_kept_whole() -> None:
    call = ToolCall(id="t", name="save_preference", input={"key": "tone", "value": "dark"})
    made = message("assistant", "Noted.", tool_calls=[call])
    assert fitted(made, 60_000) == made


def test_a_turn_saves_the_users_message_whole_and_fits_what_the_model_made() -> None:
    call = ToolCall(id="t", name="save_preference", input={"key": "tone", "value": GRIN * 100_000})
    exchange = Exchange(
        reply=ModelReply(text=GRIN * 200_000),
        rounds=[ToolRound(calls=[call], results=[ToolResult(tool_call_id="t", content="bad")])],
    )
    budget = Settings().model_message_max_bytes
    user, tool, reply = turn_messages(GRIN * 16_000, "m", exchange, AT, budget)
    assert user.content == GRIN * 16_000
    assert tool.tool_calls[0].input == {"key": "tone"}
    assert reply.content and set(reply.content) == {GRIN}
    for made in (tool, reply):
        assert len(json.dumps(made.model_dump(mode="json", exclude_none=True))) <= budget
    assert Settings().window_max_bytes + 4_096 < ITEM_MAX_BYTES  # the session's keys fit too


def test_stored_size_of_numbers_follows_significant_digits() -> None:
    assert stored_size(12345) == 4
    assert stored_size(1000) == 2
    assert stored_size(0.5) == 2
