"""Memory tools for models that cannot call tools: the reply carries them as JSON.

The model is asked to answer with one JSON object holding its reply and any memory
updates; those updates come back as the same `save_preference` / `forget_preference`
calls a native model would make, so the chat service runs them unchanged. The updates
arrive with the reply itself, so the turn always ends there (`end_turn`).

A request that forces a tool (structured output, as extraction asks for) cannot force
one on such a model: Bedrock takes a specific tool choice only from models with tool use.
The model is asked instead for one JSON object that is that tool's input, and the object
comes back as the call a native model would have made.

Streamed, the raw JSON never reaches the client: with the memory tools offered the reply
text is known only once the envelope parses, so it is handed over whole then; without
them the inner model's text is the reply and streams through as it is written.
"""

from __future__ import annotations

from collections.abc import Iterator
import hashlib
import json
import re
from typing import Any, Final

from recall.domain.prompt import (
    ModelProvider,
    ModelRejected,
    ModelReply,
    ModelRequest,
    PromptMessage,
    StopReason,
    StreamingProvider,
    TextSink,
    ToolCall,
    ToolSpec,
)
from recall.domain.tools import (
    DEFAULT_SCOPE,
    FORGET_PREFERENCE,
    KEY_PATTERN,
    MAX_VALUE_LENGTH,
    MEMORY_CATEGORIES,
    MEMORY_SCOPES,
    SAVE_PREFERENCE,
)

DEFAULT_CATEGORY: Final = "context"

REPLY_FORMAT: Final = (
    "Answer with exactly one JSON object and nothing else, in this shape:\n"
    '{"reply": "<your answer to the user>", "updates": {'
    '"remember": {"key": "<snake_case_key>", "value": "<the rule or fact>", '
    '"scope": "persistent" | "thread", "category": "<category>"}, '
    '"forget": {"key": "<key>", "scope": "persistent" | "thread"}}}\n'
    '"updates" is optional: include it only when the user states something to keep '
    "(a durable preference, a brand rule, a forbidden thing) or asks to forget an entry. "
    '"remember" may be a list of such objects. Keys match '
    f"{KEY_PATTERN}; categories are {', '.join(MEMORY_CATEGORIES)}; scope is "
    f'"thread" only for rules meant for this conversation alone, else "{DEFAULT_SCOPE}".'
)

TOOL_FORMAT: Final = (
    "Answer with exactly one JSON object and nothing else: the input of {name} "
    "({description}), as this JSON Schema describes it:\n{schema}"
)

_KEY: Final = re.compile(KEY_PATTERN)
_FENCED: Final = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class JsonProtocolProvider:
    """A `ModelProvider` that wraps another and speaks the JSON reply protocol to it."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def converse(self, request: ModelRequest) -> ModelReply:
        """Ask the inner model for a JSON reply and turn its updates into tool calls.

        Only the two memory tools have a JSON form; without them the request goes to the
        inner model as plain conversation and its text comes back untouched. A forced tool
        is asked for as its JSON input instead.
        """
        if request.tool_choice is not None:
            return self._forced(request)
        offered = _offered(request)
        return self._reply(offered, self.inner.converse(self._inner_request(request, offered)))

    def converse_stream(self, request: ModelRequest, on_text: TextSink) -> ModelReply:
        """``converse``, with the reply text handed to ``on_text``: whole once the envelope
        parses, or as the inner model writes it when there is no envelope to parse."""
        offered = _offered(request)
        streams = request.tool_choice is None and not offered
        if streams and isinstance(self.inner, StreamingProvider):
            inner_request = self._inner_request(request, offered)
            return self._reply(offered, self.inner.converse_stream(inner_request, on_text))
        reply = self.converse(request)
        if reply.text:
            on_text(reply.text)
        return reply

    def _forced(self, request: ModelRequest) -> ModelReply:
        """The forced tool's call, made of the one JSON object the model answers; an answer
        with none is its text alone, as a native model that ignored the tool would give."""
        tool = next((tool for tool in request.tools if tool.name == request.tool_choice), None)
        if tool is None:
            raise ModelRejected(
                f"Model {request.model_id} must call {request.tool_choice!r}, "
                "which the request does not offer"
            )
        reply = self.inner.converse(
            request.model_copy(
                update={
                    "system": [*request.system, _tool_format(tool)],
                    "messages": [_as_plain_text(message) for message in request.messages],
                    "tools": [],
                    "tool_choice": None,
                }
            )
        )
        stop_reason = _ended(reply.stop_reason)
        arguments = next(_objects(reply.text), None)
        if arguments is None:
            return ModelReply(text=reply.text, usage=reply.usage, stop_reason=stop_reason)
        digest = hashlib.sha256(reply.text.encode()).hexdigest()
        return ModelReply(
            tool_calls=[ToolCall(id=f"json-{digest[:12]}", name=tool.name, input=arguments)],
            usage=reply.usage,
            stop_reason=stop_reason,
        )

    @staticmethod
    def _inner_request(request: ModelRequest, offered: set[str]) -> ModelRequest:
        system = [*request.system, REPLY_FORMAT] if offered else request.system
        return request.model_copy(
            update={
                "system": system,
                "messages": [_as_plain_text(message) for message in request.messages],
                "tools": [],
            }
        )

    @staticmethod
    def _reply(offered: set[str], reply: ModelReply) -> ModelReply:
        stop_reason = _ended(reply.stop_reason)
        envelope = parse_envelope(reply.text) if offered else None
        if envelope is None:
            return ModelReply(text=reply.text, usage=reply.usage, stop_reason=stop_reason)
        text = envelope.get("reply")
        return ModelReply(
            text=text if isinstance(text, str) else "",
            tool_calls=[
                call
                for call in tool_calls(envelope.get("updates"), reply.text)
                if call.name in offered
            ],
            usage=reply.usage,
            stop_reason=stop_reason,
        )


def _offered(request: ModelRequest) -> set[str]:
    return {tool.name for tool in request.tools} & {SAVE_PREFERENCE, FORGET_PREFERENCE}


def _ended(stop_reason: StopReason) -> StopReason:
    """What the model's calls arrive with is all it does: the answer ends there."""
    return "end_turn" if stop_reason == "tool_use" else stop_reason


def _tool_format(tool: ToolSpec) -> str:
    return TOOL_FORMAT.format(
        name=tool.name, description=tool.description, schema=json.dumps(tool.input_schema)
    )


def parse_envelope(text: str) -> dict[str, Any] | None:
    """The protocol object in a reply: bare, fenced, or wrapped in prose; else None."""
    return next((value for value in _objects(text) if _is_envelope(value)), None)


def _objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects a reply holds, likeliest first: the whole reply, fenced blocks,
    then each object found in prose."""
    candidates = [text.strip(), *(block.strip() for block in _FENCED.findall(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield dict(value)
    decoder = json.JSONDecoder()
    for start in (index for index, char in enumerate(text) if char == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield dict(value)


def tool_calls(updates: Any, seed: str) -> list[ToolCall]:
    """The memory tool calls equivalent to an `updates` object; malformed parts dropped."""
    if not isinstance(updates, dict):
        return []
    calls: list[ToolCall] = []
    for name, field in ((SAVE_PREFERENCE, "remember"), (FORGET_PREFERENCE, "forget")):
        items = updates.get(field)
        for item in items if isinstance(items, list) else [items]:
            arguments = _arguments(name, item)
            if arguments is not None:
                digest = hashlib.sha256(f"{seed}\n{len(calls)}".encode()).hexdigest()
                calls.append(ToolCall(id=f"json-{digest[:12]}", name=name, input=arguments))
    return calls


def _arguments(name: str, item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    key = str(item.get("key", "")).strip().lower().replace(" ", "_")
    if not _KEY.match(key):
        return None
    scope = item.get("scope")
    arguments: dict[str, Any] = {
        "key": key,
        "scope": scope if scope in MEMORY_SCOPES else DEFAULT_SCOPE,
    }
    if name == FORGET_PREFERENCE:
        return arguments
    value = item.get("value")
    if not isinstance(value, str | int | float) or not str(value).strip():
        return None
    category = item.get("category")
    arguments["value"] = str(value).strip()[:MAX_VALUE_LENGTH]
    arguments["category"] = category if category in MEMORY_CATEGORIES else DEFAULT_CATEGORY
    return arguments


def _is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and ("reply" in value or "updates" in value)


def _as_plain_text(message: PromptMessage) -> PromptMessage:
    """A message with its tool calls and results written out, for a model without tools."""
    lines = [message.text] if message.text.strip() else []
    lines += [
        f"[memory update {call.name}: {json.dumps(call.input, sort_keys=True)}]"
        for call in message.tool_calls
    ]
    lines += [
        f"[{'failed' if result.is_error else 'done'}: {result.content}]"
        for result in message.tool_results
    ]
    return PromptMessage(role=message.role, text="\n".join(lines))
