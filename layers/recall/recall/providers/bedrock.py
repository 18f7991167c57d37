"""Amazon Bedrock, through the model-agnostic Converse API.

Converse gives one request shape and native tool calling for every Bedrock chat model,
so the chat service never learns a vendor's own format. This module is the only one
that knows that shape, and the only one that turns Bedrock's errors into `ModelError`s.
ConverseStream takes the same request; its events are assembled into the same reply, and
an error raised inside the stream maps like one raised by the call.

For models with prompt caching it also marks, with ``cachePoint`` blocks, where the parts
the domain request calls stable end: after the system part and after the window. None goes
in the tools: Claude caches tools, then system, then messages, so the system's point covers
them, and Nova refuses a cache point there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
import json
import time
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    ReadTimeoutError,
)
from urllib3.exceptions import ReadTimeoutError as StreamReadTimeout

from recall.domain.prompt import (
    ModelError,
    ModelRejected,
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    ModelUnavailable,
    PromptMessage,
    StopReason,
    TextSink,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.literals import StopReasonType
    from mypy_boto3_bedrock_runtime.type_defs import (
        CachePointBlockTypeDef,
        ContentBlockOutputTypeDef,
        ContentBlockTypeDef,
        ConverseRequestTypeDef,
        ConverseResponseTypeDef,
        ConverseStreamRequestTypeDef,
        MessageTypeDef,
        SystemContentBlockTypeDef,
        ToolConfigurationTypeDef,
        ToolTypeDef,
    )

_ERRORS_BY_CODE: Final[dict[str, type[ModelError]]] = {
    "ThrottlingException": ModelThrottled,
    "ServiceUnavailableException": ModelUnavailable,
    "ModelNotReadyException": ModelUnavailable,
    "ModelTimeoutException": ModelTimeout,
    "ValidationException": ModelRejected,
    "AccessDeniedException": ModelRejected,
    "ResourceNotFoundException": ModelRejected,
}
_TIMEOUTS: Final = (ReadTimeoutError, ConnectTimeoutError, ConnectionClosedError)

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

# Converse rejects a conversation that opens with the assistant; a window cut from the
# middle of a thread can, so it gets this neutral opening instead of losing a message.
WINDOW_OPENING: Final = "(the earlier messages of this conversation are not shown)"
EMPTY_TOOL_RESULT: Final = "(no output)"

Role = Literal["user", "assistant"]

CACHE_POINT: Final[CachePointBlockTypeDef] = {"type": "default"}


def caches_prompts(model_id: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a model id, or an inference profile id (``us.``, ``eu.``, ``global.``… before
    a model id), names a model that takes cache points."""
    return model_id.startswith(prefixes) or model_id.partition(".")[2].startswith(prefixes)


class BedrockProvider:
    """A `ModelProvider` backed by `bedrock-runtime` `converse`."""

    def __init__(
        self,
        client: BedrockRuntimeClient | None = None,
        *,
        max_attempts: int = 3,
        read_timeout: float = 25.0,
        connect_timeout: float = 5.0,
        cache_model_prefixes: tuple[str, ...] = (),
    ) -> None:
        self._client = client
        self._injected = client is not None
        self._cache_model_prefixes = cache_model_prefixes
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._config = Config(
            retries={"mode": "adaptive", "total_max_attempts": max_attempts},
            read_timeout=read_timeout,
            connect_timeout=connect_timeout,
        )
        self._timed: dict[tuple[int, int], BedrockRuntimeClient] = {}

    @property
    def client(self) -> BedrockRuntimeClient:
        """The injected client, or one made on first use so imports stay free of AWS."""
        if self._client is None:
            self._client = boto3.client("bedrock-runtime", config=self._config)
        return self._client

    def _client_within(self, timeout: float | None) -> BedrockRuntimeClient:
        """The client for a call that must end within ``timeout`` seconds: botocore's
        timeouts are the client's, and its retries would wait them out again on every
        attempt, so such a call gets a client whose connect and read timeouts add up to
        at most that many whole seconds (a few, made once each) and that tries once; the
        turn retries within its own time."""
        if timeout is None or self._injected:
            return self.client
        seconds = int(timeout)
        connect = max(1, min(int(self._connect_timeout), seconds // 4))
        read = max(1, min(seconds - connect, int(self._read_timeout)))
        if (connect, read) not in self._timed:
            config = Config(
                retries={"mode": "standard", "total_max_attempts": 1},
                read_timeout=read,
                connect_timeout=connect,
            )
            self._timed[(connect, read)] = boto3.client("bedrock-runtime", config=config)
        return self._timed[(connect, read)]

    def converse(self, request: ModelRequest) -> ModelReply:
        """Send one Converse request and map the reply, or raise a `ModelError`."""
        params = converse_params(
            request, cache_points=caches_prompts(request.model_id, self._cache_model_prefixes)
        )
        try:
            response = self._client_within(request.timeout_seconds).converse(**params)
        except (ClientError, BotoCoreError) as exc:
            raise model_error(exc, request.model_id) from exc
        return model_reply(response)

    def converse_stream(self, request: ModelRequest, on_text: TextSink) -> ModelReply:
        """Send one ConverseStream request, hand its text to ``on_text`` as it arrives and
        return the reply ``converse`` would have; a failure, before or during the stream,
        raises the same `ModelError`."""
        params = converse_params(
            request, cache_points=caches_prompts(request.model_id, self._cache_model_prefixes)
        )
        try:
            # The same request: it differs from Converse's only in a guardrail we never set.
            timeout = request.timeout_seconds
            ends = None if timeout is None else time.monotonic() + timeout
            client = self._client_within(timeout)
            response = client.converse_stream(**cast("ConverseStreamRequestTypeDef", params))
            return streamed_reply(response["stream"], on_text, ends)
        except (ClientError, BotoCoreError) as exc:
            raise model_error(exc, request.model_id) from exc
        except StreamReadTimeout as exc:
            # A wait for the next event past the read timeout, raised by urllib3 as the
            # stream is read, not by botocore.
            raise ModelTimeout(f"Bedrock stopped streaming for model {request.model_id}") from exc


def model_error(exc: ClientError | BotoCoreError, model_id: str) -> ModelError:
    """The `ModelError` for a failed call. An error event inside a stream names its code
    as the stream's member (``throttlingException``), the call as the exception's name."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Unknown")
        code = code[:1].upper() + code[1:]
        detail = error.get("Message", "") or str(exc)
        error_type = _ERRORS_BY_CODE.get(code, ModelError)
        return error_type(f"Bedrock {code} for model {model_id}: {detail}")
    if isinstance(exc, _TIMEOUTS):
        return ModelTimeout(f"Bedrock {type(exc).__name__} for model {model_id}: {exc}")
    return ModelError(f"Bedrock {type(exc).__name__} for model {model_id}: {exc}")


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
