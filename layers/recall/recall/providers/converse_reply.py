"""The domain reply for what Converse answers: a whole reply (``model_reply``) or
ConverseStream's events assembled into the same reply as they arrive (``streamed_reply``),
with Bedrock's stop reasons folded into the domain's smaller set."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
import json
import time
from typing import TYPE_CHECKING, Any, Final

from recall.domain.prompt import (
    ModelReply,
    ModelTimeout,
    StopReason,
    TextSink,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.literals import StopReasonType
    from mypy_boto3_bedrock_runtime.type_defs import (
        ContentBlockOutputTypeDef,
        ConverseResponseTypeDef,
    )

# Bedrock reports a few reasons the domain folds into its smaller set.
_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "guardrail_intervened": "guardrail",
    "content_filtered": "content_filtered",
}


def model_reply(response: ConverseResponseTypeDef) -> ModelReply:
    """The domain reply for a Converse response: text blocks joined, tool uses kept."""
    content: list[ContentBlockOutputTypeDef] = (
        response.get("output", {}).get("message", {}).get("content", [])
    )
    texts = [block["text"] for block in content if block.get("text")]
    tool_calls = [
        ToolCall(
            id=block["toolUse"]["toolUseId"],
            name=block["toolUse"]["name"],
            input=_as_object(block["toolUse"].get("input")),
        )
        for block in content
        if "toolUse" in block
    ]
    usage = response.get("usage", {})
    return ModelReply(
        text="\n".join(texts),
        tool_calls=tool_calls,
        usage=_usage(usage),
        stop_reason=_stop_reason(response.get("stopReason"), has_tool_calls=bool(tool_calls)),
    )


def streamed_reply(
    events: Iterable[Mapping[str, Any]],
    on_text: TextSink,
    ends: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> ModelReply:
    """The domain reply for ConverseStream's events, text handed to ``on_text`` as it comes.
    Text blocks are joined with a newline, as ``model_reply`` joins them; a tool use's input
    arrives as JSON text in pieces and is parsed once its block stops. A stream still
    running at ``ends`` (``monotonic`` seconds) is closed and is a ModelTimeout: a read
    timeout bounds each wait for the next event, never the whole stream."""
    texts: dict[int, str] = {}
    tools: dict[int, dict[str, str]] = {}
    usage: Mapping[str, Any] = {}
    reason: Any = None
    for event in events:
        if ends is not None and monotonic() > ends:
            close = getattr(events, "close", None)
            if callable(close):
                close()
            raise ModelTimeout("The model was still writing when this turn's time ran out.")
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            tool_use = start.get("start", {}).get("toolUse")
            if tool_use:
                tools[start["contentBlockIndex"]] = {
                    "id": tool_use["toolUseId"],
                    "name": tool_use["name"],
                    "input": "",
                }
        elif "contentBlockDelta" in event:
            delta = event["contentBlockDelta"]
            index = delta["contentBlockIndex"]
            if text := delta["delta"].get("text"):
                if index not in texts and any(texts.values()):
                    on_text("\n")
                texts[index] = texts.get(index, "") + text
                on_text(text)
            elif "toolUse" in delta["delta"] and index in tools:
                tools[index]["input"] += delta["delta"]["toolUse"].get("input", "")
        elif "messageStop" in event:
            reason = event["messageStop"].get("stopReason")
        elif "metadata" in event:
            usage = event["metadata"].get("usage", {})
    tool_calls = [
        ToolCall(id=tool["id"], name=tool["name"], input=_parsed_input(tool["input"]))
        for _, tool in sorted(tools.items())
    ]
    return ModelReply(
        text="\n".join(text for _, text in sorted(texts.items()) if text),
        tool_calls=tool_calls,
        usage=_usage(usage),
        stop_reason=_stop_reason(reason, has_tool_calls=bool(tool_calls)),
    )


def _parsed_input(text: str) -> dict[str, Any]:
    """A streamed tool input: JSON once whole; an empty one is no arguments."""
    if not text.strip():
        return {}
    try:
        return _as_object(json.loads(text))
    except ValueError:
        return {"value": text}


def _as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"value": value}


def _stop_reason(reason: StopReasonType | None, *, has_tool_calls: bool) -> StopReason:
    if reason in _STOP_REASONS:
        return _STOP_REASONS[reason]
    # malformed_model_output / malformed_tool_use, or a reason newer than this code.
    return "tool_use" if has_tool_calls else "end_turn"


def _usage(usage: Mapping[str, Any]) -> Usage:
    """The usage a Converse reply or a ConverseStream ``metadata`` event reports."""
    return Usage(
        input_tokens=usage.get("inputTokens", 0),
        output_tokens=usage.get("outputTokens", 0),
        cache_read_input_tokens=usage.get("cacheReadInputTokens", 0),
        cache_write_input_tokens=usage.get("cacheWriteInputTokens", 0),
    )
