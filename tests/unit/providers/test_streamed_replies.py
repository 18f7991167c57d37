"""Each provider streams a reply that is the reply it would return unstreamed: Bedrock's
ConverseStream events under botocore's Stubber (the request checked against the service
model, the events put in its parsed response), the offline model's word chunks, and the
JSON protocol, which never lets its raw JSON reach the stream."""

from __future__ import annotations

from collections.abc import Iterator
import time
from typing import Any

from botocore.exceptions import EventStreamError, ReadTimeoutError
from botocore.stub import Stubber
import pytest
from urllib3.exceptions import ReadTimeoutError as StreamReadTimeout

from recall.domain.prompt import (
    ModelError,
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    PromptMessage,
    ToolCall,
)
from recall.domain.tools import MEMORY_TOOLS
from recall.providers.bedrock import BedrockProvider
from recall.providers.converse_reply import streamed_reply
from recall.providers.json_protocol import JsonProtocolProvider
from recall.providers.offline import OfflineProvider, stream_chunks

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


def request(text: str = "What colour is the header?", tools: bool = True) -> ModelRequest:
    return ModelRequest(
        model_id=MODEL,
        system=["You are a helpful store assistant."],
        messages=[PromptMessage(role="user", text=text)],
        tools=list(MEMORY_TOOLS) if tools else [],
    )


def streaming(client: Any, stubber: Stubber, events: Iterator[dict[str, Any]]) -> None:
    """ConverseStream answers ``events``: the Stubber checks the request and answers a
    placeholder, which the parsed response's stream is swapped for."""
    stubber.add_response("converse_stream", {"stream": {"messageStart": {"role": "assistant"}}})

    def swap(parsed: dict[str, Any], **_: Any) -> None:
        parsed["stream"] = events

    client.meta.events.register("after-call.bedrock-runtime.ConverseStream", swap)


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": text}}}


def test_bedrock_stream_hands_over_text_as_it_comes_and_assembles_the_same_reply(
    client: Any, stubber: Stubber
) -> None:
    # Given a stream with two text blocks, a tool use in pieces, a stop and the usage
    events = [
        {"messageStart": {"role": "assistant"}},
        text_delta(0, "Noted, "),
        text_delta(0, "the header stays dark."),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {
            "contentBlockStart": {
                "contentBlockIndex": 1,
                "start": {"toolUse": {"toolUseId": "t-1", "name": "save_preference"}},
            }
        },
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"key"'}}}},
        {
            "contentBlockDelta": {
                "contentBlockIndex": 1,
                "delta": {"toolUse": {"input": ': "header_dark", "value": "dark"}'}},
            }
        },
        {"contentBlockStop": {"contentBlockIndex": 1}},
        text_delta(2, "Anything else?"),
        {"messageStop": {"stopReason": "tool_use"}},
        {
            "metadata": {
                "usage": {
                    "inputTokens": 30,
                    "outputTokens": 12,
                    "totalTokens": 62,
                    "cacheReadInputTokens": 15,
                    "cacheWriteInputTokens": 5,
                },
                "metrics": {"latencyMs": 80},
            }
        },
    ]
    streaming(client, stubber, iter(events))
    chunks: list[str] = []
    # When
    reply = BedrockProvider(client).converse_stream(request(), chunks.append)
    # Then the chunks came in order and join to the reply's text, blocks a newline apart
    assert chunks == ["Noted, ", "the header stays dark.", "\n", "Anything else?"]
    assert "".join(chunks) == reply.text == "Noted, the header stays dark.\nAnything else?"
    assert reply.tool_calls == [
        ToolCall(id="t-1", name="save_preference", input={"key": "header_dark", "value": "dark"})
    ]
    assert reply.stop_reason == "tool_use"
    assert reply.usage.input_tokens == 30
    assert reply.usage.output_tokens == 12
    assert reply.usage.cache_read_input_tokens == 15
    assert reply.usage.cache_write_input_tokens == 5


def test_an_error_inside_the_stream_maps_like_the_same_error_from_the_call(
    client: Any, stubber: Stubber
) -> None:
    # Given a stream that throttles after its first words
    def events() -> Iterator[dict[str, Any]]:
        yield text_delta(0, "Let me ")
        raise EventStreamError(
            {"Error": {"Code": "throttlingException", "Message": "slow down"}}, "ConverseStream"
        )

    streaming(client, stubber, events())
    chunks: list[str] = []
    # When / Then
    with pytest.raises(ModelThrottled, match="ThrottlingException"):
        BedrockProvider(client).converse_stream(request(), chunks.append)
    assert chunks == ["Let me "]


def test_a_stream_that_times_out_midway_is_a_model_timeout(client: Any, stubber: Stubber) -> None:
    # Given
    def events() -> Iterator[dict[str, Any]]:
        yield text_delta(0, "Let me ")
        raise ReadTimeoutError(endpoint_url="https://bedrock")

    streaming(client, stubber, events())
    # When / Then
    with pytest.raises(ModelTimeout):
        BedrockProvider(client).converse_stream(request(), lambda chunk: None)


def test_a_refused_stream_request_is_mapped_before_any_text(client: Any, stubber: Stubber) -> None:
    # Given
    stubber.add_client_error("converse_stream", "ValidationException", "bad request")
    chunks: list[str] = []
    # When / Then
    with pytest.raises(ModelError, match="ValidationException"):
        BedrockProvider(client).converse_stream(request(), chunks.append)
    assert chunks == []


def test_offline_stream_is_its_reply_in_deterministic_word_chunks() -> None:
    # Given
    offline = OfflineProvider()
    chunks: list[str] = []
    # When
    reply = offline.converse_stream(request(tools=False), chunks.append)
    # Then
    assert reply == offline.converse(request(tools=False))
    assert len(chunks) > 3
    assert "".join(chunks) == reply.text
    assert chunks == stream_chunks(reply.text)


class FixedModel:
    """An inner model that answers one text, streamed a few characters at a time."""

    def __init__(self, text: str) -> None:
        self.text = text

    def converse(self, request: ModelRequest) -> ModelReply:
        return ModelReply(text=self.text)

    def converse_stream(self, request: ModelRequest, on_text: Any) -> ModelReply:
        for start in range(0, len(self.text), 5):
            on_text(self.text[start : start + 5])
        return self.converse(request)


def test_json_protocol_streams_only_the_parsed_reply_text_never_its_json() -> None:
    # Given an inner model answering the JSON envelope
    inner = FixedModel(
        '{"reply": "Noted.", "updates": {"remember": {"key": "header_dark", "value": "dark"}}}'
    )
    chunks: list[str] = []
    # When
    reply = JsonProtocolProvider(inner).converse_stream(request(), chunks.append)
    # Then
    assert chunks == ["Noted."]
    assert reply.text == "Noted."
    assert [call.name for call in reply.tool_calls] == ["save_preference"]


def test_json_protocol_without_memory_tools_streams_the_inner_text_as_written() -> None:
    # Given
    inner = FixedModel("A plain answer with no envelope.")
    chunks: list[str] = []
    # When
    reply = JsonProtocolProvider(inner).converse_stream(request(tools=False), chunks.append)
    # Then
    assert len(chunks) > 1
    assert "".join(chunks) == reply.text == inner.text


class ClosableEvents:
    """A stream of events that knows whether it was closed."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.events)

    def close(self) -> None:
        self.closed = True


def test_a_stream_still_writing_when_the_turns_time_ends_is_closed_as_a_timeout() -> None:
    # Given a stream of five deltas, each a second apart, and a turn with 2.5 s left
    events = ClosableEvents([text_delta(0, f"w{n} ") for n in range(5)])
    ticks = iter(float(n) for n in range(10))
    heard: list[str] = []
    # When / Then
    with pytest.raises(ModelTimeout):
        streamed_reply(events, heard.append, ends=2.5, monotonic=lambda: next(ticks))
    assert heard == ["w0 ", "w1 ", "w2 "]
    assert events.closed


def test_a_stream_whose_next_event_never_comes_is_a_timeout(client: Any, stubber: Stubber) -> None:
    # Given a stream that stops sending, read by urllib3 past the read timeout
    def stalled() -> Iterator[dict[str, Any]]:
        yield text_delta(0, "Here")
        raise StreamReadTimeout(None, "", "Read timed out.")  # type: ignore[arg-type]

    streaming(client, stubber, stalled())
    # When / Then
    with pytest.raises(ModelTimeout):
        BedrockProvider(client).converse_stream(request(), lambda _: None)


def test_bedrock_stops_reading_a_stream_at_the_time_the_call_was_given(
    client: Any, stubber: Stubber
) -> None:
    # Given a stream that keeps writing, a delta every 0.1 s, and a call given 0.25 s
    def slow() -> Iterator[dict[str, Any]]:
        for n in range(20):
            time.sleep(0.1)
            yield text_delta(0, f"w{n} ")

    streaming(client, stubber, slow())
    heard: list[str] = []
    # When / Then
    with pytest.raises(ModelTimeout):
        BedrockProvider(client).converse_stream(
            request().model_copy(update={"timeout_seconds": 0.25}), heard.append
        )
    assert len(heard) < 20
