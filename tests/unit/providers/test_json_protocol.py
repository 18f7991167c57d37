"""The JSON reply protocol: memory updates for models without native tool calls."""

from __future__ import annotations

import json

import pytest

from recall.domain.prompt import (
    ModelRejected,
    ModelReply,
    ModelRequest,
    PromptMessage,
    StopReason,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from recall.domain.tools import FORGET_PREFERENCE, MEMORY_TOOLS, SAVE_PREFERENCE
from recall.providers import new_provider
from recall.providers.bedrock import BedrockProvider
from recall.providers.json_protocol import REPLY_FORMAT, JsonProtocolProvider
from recall.providers.offline import OfflineProvider


class ScriptedModel:
    """An inner model that answers with fixed text and keeps what it was asked."""

    def __init__(self, text: str, stop_reason: StopReason = "end_turn") -> None:
        self.text = text
        self.stop_reason = stop_reason
        self.requests: list[ModelRequest] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(
            text=self.text,
            usage=Usage(input_tokens=7, output_tokens=3),
            stop_reason=self.stop_reason,
        )


def turn(*messages: PromptMessage, tools: bool = True) -> ModelRequest:
    return ModelRequest(
        model_id="llama",
        system=["Be helpful."],
        messages=list(messages) or [PromptMessage(role="user", text="Hi")],
        tools=MEMORY_TOOLS if tools else [],
    )


def answer(text: str, request: ModelRequest | None = None) -> ModelReply:
    return JsonProtocolProvider(ScriptedModel(text)).converse(request or turn())


def test_remember_becomes_a_save_preference_call() -> None:
    # Given
    text = json.dumps(
        {
            "reply": "Dark header it is.",
            "updates": {
                "remember": {
                    "key": "header_dark",
                    "value": "always keep the header dark",
                    "scope": "persistent",
                    "category": "preferences",
                }
            },
        }
    )

    # When
    reply = answer(text)

    # Then
    assert reply.text == "Dark header it is."
    assert reply.stop_reason == "end_turn"
    assert reply.usage == Usage(input_tokens=7, output_tokens=3)
    (call,) = reply.tool_calls
    assert call.name == SAVE_PREFERENCE
    assert call.input == {
        "key": "header_dark",
        "value": "always keep the header dark",
        "scope": "persistent",
        "category": "preferences",
    }


def test_remember_without_category_or_scope_gets_the_defaults() -> None:
    reply = answer(
        '{"reply": "ok", "updates": {"remember": {"key": "Store Name", "value": "Crumb"}}}'
    )

    assert reply.tool_calls[0].input == {
        "key": "store_name",
        "value": "Crumb",
        "scope": "persistent",
        "category": "context",
    }


def test_forget_becomes_a_forget_preference_call() -> None:
    reply = answer(
        '{"reply": "Forgotten.", "updates": {"forget": {"key": "tone", "scope": "thread"}}}'
    )

    assert [(c.name, c.input) for c in reply.tool_calls] == [
        (FORGET_PREFERENCE, {"key": "tone", "scope": "thread"})
    ]


def test_remember_list_gives_one_call_each_and_drops_malformed_items() -> None:
    # Given
    updates = {
        "remember": [
            {"key": "a", "value": "first", "category": "brand"},
            {"key": "bad key!", "value": "dropped"},
            {"key": "b", "value": "  "},
            "not an object",
            {"key": "c", "value": "third", "category": "made_up", "scope": "forever"},
        ],
        "forget": {"key": "d"},
    }

    # When
    reply = answer(json.dumps({"reply": "Saved.", "updates": updates}))

    # Then
    assert [(c.name, c.input["key"]) for c in reply.tool_calls] == [
        (SAVE_PREFERENCE, "a"),
        (SAVE_PREFERENCE, "c"),
        (FORGET_PREFERENCE, "d"),
    ]
    assert reply.tool_calls[1].input["category"] == "context"
    assert reply.tool_calls[1].input["scope"] == "persistent"
    assert len({c.id for c in reply.tool_calls}) == 3


def test_fenced_json_block_is_parsed() -> None:
    text = 'Sure!\n```json\n{"reply": "Navy works.", "updates": {"forget": {"key": "x"}}}\n```\n'

    reply = answer(text)

    assert reply.text == "Navy works."
    assert reply.tool_calls[0].name == FORGET_PREFERENCE


def test_prose_around_one_json_object_is_tolerated() -> None:
    reply = answer('Here you go: {"reply": "Use {braces} freely.", "updates": {}} Hope it helps.')

    assert reply.text == "Use {braces} freely."
    assert reply.tool_calls == []


@pytest.mark.parametrize(
    "garbage",
    ["Just a plain answer.", '{"reply": "cut off', "[1, 2, 3]", '{"colour": "navy"}', ""],
)
def test_a_reply_that_is_not_the_protocol_is_plain_text(garbage: str) -> None:
    reply = answer(garbage)

    assert reply.text == garbage
    assert reply.tool_calls == []
    assert reply.stop_reason == "end_turn"


def test_inner_model_gets_the_format_and_no_tools() -> None:
    # Given
    inner = ScriptedModel('{"reply": "hi"}')

    # When
    JsonProtocolProvider(inner).converse(turn())

    # Then
    (sent,) = inner.requests
    assert sent.tools == []
    assert sent.system == ["Be helpful.", REPLY_FORMAT]


def test_tool_history_is_rendered_as_plain_text_for_the_inner_model() -> None:
    # Given
    inner = ScriptedModel('{"reply": "ok"}')
    call = ToolCall(id="t1", name=SAVE_PREFERENCE, input={"key": "header_dark"})
    request = turn(
        PromptMessage(role="user", text="Always keep the header dark"),
        PromptMessage(role="assistant", tool_calls=[call]),
        PromptMessage(role="user", tool_results=[ToolResult(tool_call_id="t1", content="saved")]),
    )

    # When
    JsonProtocolProvider(inner).converse(request)

    # Then
    sent = inner.requests[0].messages
    assert all(not m.tool_calls and not m.tool_results for m in sent)
    assert [m.text for m in sent] == [
        "Always keep the header dark",
        '[memory update save_preference: {"key": "header_dark"}]',
        "[done: saved]",
    ]


def test_without_memory_tools_the_inner_text_passes_through_untouched() -> None:
    # Given
    inner = ScriptedModel('{"reply": "not unwrapped"}', stop_reason="max_tokens")

    # When
    reply = JsonProtocolProvider(inner).converse(turn(tools=False))

    # Then
    assert inner.requests[0].system == ["Be helpful."]
    assert reply.text == '{"reply": "not unwrapped"}'
    assert reply.stop_reason == "max_tokens"


RECORD = ToolSpec(
    name="record_facts",
    description="Record the facts",
    input_schema={"type": "object", "properties": {"facts": {"type": "array"}}},
)


def forcing(tool: str = RECORD.name) -> ModelRequest:
    """A request that must end in one call of ``tool`` (structured output)."""
    return turn().model_copy(update={"tools": [RECORD], "tool_choice": tool})


def test_a_forced_tool_is_asked_for_as_its_json_input_and_comes_back_as_its_call() -> None:
    # Given a model that answers the object in a fenced block
    inner = ScriptedModel('Here it is:\n```json\n{"facts": ["the header is dark"]}\n```')

    # When a request forces a tool on it
    reply = JsonProtocolProvider(inner).converse(forcing())

    # Then the model was asked for the tool's input as JSON, with no tool to choose
    (sent,) = inner.requests
    assert (sent.tools, sent.tool_choice) == ([], None)
    assert sent.system[0] == "Be helpful."
    assert "record_facts" in sent.system[1]
    assert json.dumps(RECORD.input_schema) in sent.system[1]
    # And the object is the forced tool's call
    (call,) = reply.tool_calls
    assert (call.name, call.input) == ("record_facts", {"facts": ["the header is dark"]})
    assert (reply.text, reply.stop_reason) == ("", "end_turn")
    assert reply.usage == Usage(input_tokens=7, output_tokens=3)


def test_a_forced_tool_answered_without_json_is_the_text_alone() -> None:
    reply = JsonProtocolProvider(ScriptedModel("No facts here.")).converse(forcing())

    assert (reply.text, reply.tool_calls) == ("No facts here.", [])


def test_a_forced_tool_the_request_does_not_offer_is_rejected_before_any_call() -> None:
    inner = ScriptedModel("{}")

    with pytest.raises(ModelRejected, match="record_other"):
        JsonProtocolProvider(inner).converse(forcing("record_other"))
    assert inner.requests == []


def test_offline_model_behind_the_protocol_answers_in_plain_text() -> None:
    reply = new_provider("offline", json_protocol=True).converse(
        turn(PromptMessage(role="user", text="always keep the header dark"))
    )

    assert reply.stop_reason == "end_turn"
    assert reply.tool_calls == []
    assert reply.text.startswith("I can see 0 memory entries")


@pytest.mark.parametrize(
    ("name", "kind"), [("offline", OfflineProvider), (" Bedrock ", BedrockProvider)]
)
def test_new_provider_chooses_by_name(name: str, kind: type) -> None:
    assert isinstance(new_provider(name), kind)


def test_new_provider_refuses_an_unknown_name() -> None:
    with pytest.raises(ValueError, match="openai"):
        new_provider("openai")
