"""The Converse request for a domain request: the one shape every Bedrock chat model
takes, built here alone. Roles alternate and the first is the user's; tool blocks go only
beside a ``toolConfig`` (otherwise earlier tool calls are sent as text). For models with
prompt caching, ``cachePoint`` blocks mark where the parts the domain request calls stable
end: after the system part and after the window. None goes in the tools: Claude caches
tools, then system, then messages, so the system's point covers them, and Nova refuses a
cache point there."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final, Literal

from recall.domain.prompt import ModelRejected, ModelRequest, PromptMessage

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime.type_defs import (
        CachePointBlockTypeDef,
        ContentBlockTypeDef,
        ConverseRequestTypeDef,
        MessageTypeDef,
        SystemContentBlockTypeDef,
        ToolConfigurationTypeDef,
        ToolTypeDef,
    )

# Converse rejects a conversation that opens with the assistant; a window cut from the
# middle of a thread can, so it gets this neutral opening instead of losing a message.
WINDOW_OPENING: Final = "(the earlier messages of this conversation are not shown)"
EMPTY_TOOL_RESULT: Final = "(no output)"

Role = Literal["user", "assistant"]

CACHE_POINT: Final[CachePointBlockTypeDef] = {"type": "default"}


def converse_params(request: ModelRequest, *, cache_points: bool = False) -> ConverseRequestTypeDef:
    """The Converse request for a domain request.

    Tool blocks are only valid next to a `toolConfig`, so when a request offers no tools
    (a last round that must end in text) earlier tool calls are sent as plain text. A forced
    tool must be one the request offers: Bedrock would reject anything else. With
    ``cache_points``, a ``cachePoint`` follows the request's stable system parts and its
    stable messages.
    """
    native_tools = bool(request.tools)
    messages = _alternating(
        request.messages,
        native_tools=native_tools,
        cache_after=request.stable_messages if cache_points else 0,
    )
    if not messages:
        raise ModelRejected(f"Nothing to send to model {request.model_id}: no messages")
    offered = {tool.name for tool in request.tools}
    if request.tool_choice is not None and request.tool_choice not in offered:
        raise ModelRejected(
            f"Model {request.model_id} must call {request.tool_choice!r}, "
            "which the request does not offer"
        )
    params: ConverseRequestTypeDef = {
        "modelId": request.model_id,
        "messages": messages,
        "inferenceConfig": {
            "maxTokens": request.max_tokens,
            "temperature": request.temperature,
        },
    }
    system: list[SystemContentBlockTypeDef] = []
    for index, text in enumerate(request.system, start=1):
        if text.strip():
            system.append({"text": text})
        if cache_points and index == request.stable_system and system:
            system.append({"cachePoint": CACHE_POINT})
    if system:
        params["system"] = system
    if native_tools:
        tools: list[ToolTypeDef] = [
            {
                "toolSpec": {
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": {"json": tool.input_schema},
                }
            }
            for tool in request.tools
        ]
        tool_config: ToolConfigurationTypeDef = {"tools": tools}
        if request.tool_choice is not None:
            tool_config["toolChoice"] = {"tool": {"name": request.tool_choice}}
        params["toolConfig"] = tool_config
    return params


def _alternating(
    messages: list[PromptMessage], *, native_tools: bool, cache_after: int = 0
) -> list[MessageTypeDef]:
    """Messages as Converse wants them: user first, roles alternating, no empty blocks,
    and a ``cachePoint`` closing the first ``cache_after`` messages (0: none).

    A domain message may carry an assistant's tool calls and the results that answered
    them; the results belong to the next user turn, so each message is split by role
    before consecutive turns of one role are merged.
    """
    turns: list[MessageTypeDef] = []
    for index, message in enumerate(messages, start=1):
        for role, blocks in _blocks_by_role(message, native_tools=native_tools):
            if not blocks:
                continue
            if turns and turns[-1]["role"] == role:
                turns[-1] = {"role": role, "content": [*turns[-1]["content"], *blocks]}
            else:
                turns.append({"role": role, "content": blocks})
        if index == cache_after and turns:
            turns[-1] = {
                "role": turns[-1]["role"],
                "content": [*turns[-1]["content"], {"cachePoint": CACHE_POINT}],
            }
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"text": WINDOW_OPENING}]})
    return turns


def _blocks_by_role(
    message: PromptMessage, *, native_tools: bool
) -> list[tuple[Role, list[ContentBlockTypeDef]]]:
    text: list[ContentBlockTypeDef] = [{"text": message.text}] if message.text.strip() else []
    calls: list[ContentBlockTypeDef]
    results: list[ContentBlockTypeDef]
    if native_tools:
        calls = [
            {"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.input}}
            for call in message.tool_calls
        ]
        results = [
            {
                "toolResult": {
                    "toolUseId": result.tool_call_id,
                    "content": [{"text": result.content or EMPTY_TOOL_RESULT}],
                    "status": "error" if result.is_error else "success",
                }
            }
            for result in message.tool_results
        ]
    else:
        calls = [
            {"text": f"[called {call.name} {json.dumps(call.input, sort_keys=True)}]"}
            for call in message.tool_calls
        ]
        results = [
            {
                "text": f"[{'error' if result.is_error else 'result'} of "
                f"{result.tool_call_id}: {result.content or EMPTY_TOOL_RESULT}]"
            }
            for result in message.tool_results
        ]
    if message.role == "assistant":
        return [("assistant", text + calls), ("user", results)]
    # Anthropic models on Converse want tool results ahead of any new text in a turn.
    return [("user", results + text), ("assistant", calls)]
