"""The WebSocket chat contract without AWS: who a frame acts for (the connection's
``sub`` until its token's ``exp``), which frames a refused frame answers (the HTTP route's
status and body), how reply text is batched into ``delta`` frames, and that a client who
left is posted nothing more."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recall.api.stream import (
    ConnectionGone,
    FrameRefused,
    StreamedTurn,
    caller_of,
    read_frame,
)
from recall.domain.conversations import Conversation
from recall.errors import Unauthenticated

LIMIT = 262_144


class Posted:
    """A connection that keeps what it was sent; ``leave_after`` posts, the client goes."""

    def __init__(self, leave_after: int | None = None) -> None:
        self.frames: list[dict[str, Any]] = []
        self.leave_after = leave_after
        self.attempts = 0

    def post(self, frame: dict[str, Any]) -> None:
        self.attempts += 1
        if self.leave_after is not None and len(self.frames) >= self.leave_after:
            raise ConnectionGone("c-1")
        self.frames.append(frame)

    def close(self) -> None:
        """A streamed turn never closes its connection."""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def refusal(text: str | None) -> dict[str, Any]:
    with pytest.raises(FrameRefused) as refused:
        read_frame(text, LIMIT)
    return refused.value.frame


def chat(**fields: Any) -> str:
    frame = {"action": "chat", "projectId": "p1", "body": {"message": "hi"}, **fields}
    return json.dumps(frame)


def test_a_valid_frame_carries_the_http_body_the_project_and_the_idempotency_key() -> None:
    # When
    frame = read_frame(
        chat(
            requestId="r-1",
            idempotencyKey="k-1",
            body={"message": "hi", "conversationId": "latest"},
        ),
        LIMIT,
    )
    # Then
    assert (frame.request_id, frame.project_id, frame.idempotency_key) == ("r-1", "p1", "k-1")
    assert frame.body.conversation_id == "latest"


def test_a_frame_that_is_not_json_is_a_400_error_frame() -> None:
    assert refusal("{nope") == {
        "type": "error",
        "requestId": None,
        "status": 400,
        "body": {"error": {"code": "malformed_json", "message": "The frame is not valid JSON."}},
    }


def test_a_frame_nested_too_deeply_is_a_400_not_a_parse() -> None:
    assert refusal("[" * 10_000 + "]" * 10_000)["status"] == 400


def test_a_frame_escaping_a_lone_surrogate_is_a_400() -> None:
    assert (
        refusal(chat(body={"message": "\\ud800"}).replace("\\\\ud800", "\\ud800"))["status"] == 400
    )


DEEP = "[" * 10_000 + "]" * 10_000


@pytest.mark.parametrize(
    "text",
    [
        '{"action": "chat", "body": ' + DEEP + ', "requestId": "r-7"}',
        '{"requestId": "r-7", "action": "chat", "body": {"message": ' + "9" * 5_000 + "}}",
        '{"requestId": "r-7", "action": "chat", "body": {"message": "\\ud800"}}',
        '{"requestId": "r-7", "action": "chat", "body": {"message": "unclosed',
    ],
    ids=["too deep", "a 5000-digit integer", "a lone surrogate", "not json"],
)
def test_a_frame_refused_before_it_is_read_still_carries_its_request_id(text: str) -> None:
    # Given a frame that names its request at its top level, but cannot be read whole
    # When
    frame = refusal(text)
    # Then the console can match the 400 to the turn it sent
    assert (frame["requestId"], frame["status"]) == ("r-7", 400)
    assert frame["body"]["error"]["code"] == "malformed_json"


def test_an_oversized_frame_carries_its_request_id() -> None:
    frame = refusal(chat(requestId="r-8", body={"message": "x" * LIMIT}))
    assert (frame["requestId"], frame["status"]) == ("r-8", 413)


@pytest.mark.parametrize(
    "text",
    [
        '{"action": "chat", "body": {"requestId": "r-7", "message": ' + DEEP + "}}",
        '{"requestId": "has spaces", "body": ' + DEEP + "}",
        '{"requestId": "r-7", "requestId": 7, "body": ' + DEEP + "}",
        '[{"requestId": "r-7"}, ' + DEEP + "]",
    ],
    ids=["named only inside", "not a valid id", "named again as a number", "not an object"],
)
def test_a_refused_frame_carries_only_a_valid_request_id_of_its_top_level(text: str) -> None:
    assert refusal(text)["requestId"] is None


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_frame_with_a_number_json_has_no_place_for_is_a_400(literal: str) -> None:
    # Given a frame Python's parser reads but RFC 8259 does not: NaN or an infinity
    text = '{"action": "chat", "projectId": "p1", "body": {"message": ' + literal + "}}"
    # Then it is refused as not JSON, not as a message that is not a string
    frame = refusal(text)
    assert (frame["status"], frame["body"]["error"]["code"]) == (400, "malformed_json")


def test_an_oversized_frame_is_a_413() -> None:
    frame = refusal(chat(body={"message": "x" * (LIMIT + 1)}))
    assert (frame["status"], frame["body"]["error"]["code"]) == (413, "payload_too_large")


def test_invalid_fields_are_a_422_naming_them_and_keeping_the_request_id() -> None:
    # When: no message, an unknown field, and an action that is not chat
    frame = refusal(
        json.dumps({"action": "talk", "requestId": "r-9", "projectId": "p1", "body": {"extra": 1}})
    )
    # Then
    assert frame["status"] == 422
    assert frame["requestId"] == "r-9"
    fields = {detail["field"] for detail in frame["body"]["error"]["details"]}
    assert {"action", "message", "extra"} <= fields


def test_a_request_id_outside_the_contract_is_refused_and_not_echoed() -> None:
    frame = refusal(chat(requestId="has spaces"))
    assert (frame["status"], frame["requestId"]) == (422, None)


def test_a_project_id_no_project_can_have_is_the_strangers_403() -> None:
    frame = refusal(chat(projectId="x" * 2000))
    assert (frame["status"], frame["body"]["error"]["code"]) == (403, "forbidden")


NOW = 1_800_000_000.0


@pytest.mark.parametrize("exp", ["1800000060", 1_800_000_060, 1_800_000_000.5])
def test_a_frame_before_its_tokens_exp_acts_for_the_connections_sub(exp: Any) -> None:
    # Given the authorizer's context as API Gateway hands it on (exp as text, or a number)
    authorizer = {"principalId": "alice", "sub": "alice", "exp": exp}
    # Then a frame before the token's exp acts for alice
    assert caller_of(authorizer, NOW) == "alice"


@pytest.mark.parametrize(
    "exp", ["1800000000", 1_799_999_999, "not a time", "nan", None, True, ["1"]]
)
def test_a_frame_from_its_tokens_exp_or_with_an_unreadable_exp_is_a_401(exp: Any) -> None:
    # Given a connection whose token expired (or whose exp cannot be read)
    authorizer = {"principalId": "alice", "sub": "alice", "exp": exp}
    # When / Then the frame acts for no one, as the HTTP API refuses an expired token
    with pytest.raises(Unauthenticated, match="expired"):
        caller_of(authorizer, NOW)


def test_a_connection_without_exp_is_make_devs_demo_token_and_does_not_expire() -> None:
    assert caller_of({"principalId": "alice", "sub": "alice"}, NOW) == "alice"


def conversation() -> Conversation:
    return Conversation(
        user_id="u",
        project_id="p",
        conversation_id="c-1",
        title="Header colours",
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )


def test_the_first_text_goes_out_at_once_and_later_text_in_batches() -> None:
    # Given
    posted, clock = Posted(), Clock()
    streamed = StreamedTurn(posted, "r-1", min_chars=10, max_seconds=5.0, clock=clock)
    # When
    for chunk in ["One ", "two ", "three ", "four ", "five."]:
        streamed.text(chunk)
    streamed.finish({"type": "done"})
    # Then
    deltas = [frame["text"] for frame in posted.frames if frame["type"] == "delta"]
    assert deltas == ["One ", "two three ", "four five."]
    assert posted.frames[-1] == {"type": "done"}


def test_text_that_waited_max_seconds_goes_out_though_it_is_short() -> None:
    # Given
    posted, clock = Posted(), Clock()
    streamed = StreamedTurn(posted, None, min_chars=1000, max_seconds=0.2, clock=clock)
    streamed.text("First")
    streamed.text(" a")
    # When
    clock.now = 0.3
    streamed.text(" b")
    # Then
    assert [frame["text"] for frame in posted.frames] == ["First", " a b"]


def test_text_waiting_goes_out_before_a_tool_frame_and_frames_keep_their_order() -> None:
    # Given
    posted = Posted()
    streamed = StreamedTurn(posted, "r-2", min_chars=1000, max_seconds=60.0, clock=Clock())
    # When
    streamed.started(conversation(), True)
    streamed.text("Noted")
    streamed.text(", saving.")
    streamed.tool("save_preference", "header_dark", "saved")
    # Then
    assert posted.frames == [
        {
            "type": "start",
            "requestId": "r-2",
            "conversation": {"id": "c-1", "title": "Header colours", "created": True},
        },
        {"type": "delta", "requestId": "r-2", "text": "Noted"},
        {"type": "delta", "requestId": "r-2", "text": ", saving."},
        {
            "type": "tool",
            "requestId": "r-2",
            "tool": "save_preference",
            "key": "header_dark",
            "outcome": "saved",
        },
    ]


def test_once_the_client_is_gone_nothing_more_is_posted() -> None:
    # Given a client that leaves after the start frame
    posted = Posted(leave_after=1)
    streamed = StreamedTurn(posted, None, min_chars=1, max_seconds=0.0, clock=Clock())
    streamed.started(conversation(), False)
    # When
    for chunk in ["a", "b", "c"]:
        streamed.text(chunk)
    streamed.finish({"type": "done"})
    # Then
    assert streamed.gone
    assert posted.attempts == 2
