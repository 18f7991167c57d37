"""What a chat turn sends to a model and what comes back.

Providers (Bedrock, offline, the JSON protocol) speak only these types, so the chat
service never knows which one answered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResult(BaseModel):
    tool_call_id: str
    content: str
    is_error: bool = False


class PromptMessage(BaseModel):
    """One message of the conversation as the model sees it."""

    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)


class ToolSpec(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(BaseModel):
    model_id: str
    system: list[str]
    messages: list[PromptMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    # The name of an offered tool the model must call (structured output); None lets it choose.
    tool_choice: str | None = None
    max_tokens: int = 1024
    temperature: float = 0.3
    # Where the part that repeats on the thread's next turn ends: the tools, the first
    # ``stable_system`` system parts and the first ``stable_messages`` messages. A provider
    # whose model caches a prompt's prefix marks these ends; 0 marks nothing.
    stable_system: int = 0
    stable_messages: int = 0
    # At most how long this call may wait for the model, when a turn's time is running
    # out; None leaves it to the provider's own read timeout and retries.
    timeout_seconds: float | None = None


class Usage(BaseModel):
    """Tokens as the model bills them: ``input_tokens`` are those neither read from nor
    written to its prompt cache, which the two cache counts report apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens + other.cache_write_input_tokens,
        )


StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "guardrail", "content_filtered"
]


class ModelReply(BaseModel):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "end_turn"


class ModelProvider(Protocol):
    def converse(self, request: ModelRequest) -> ModelReply: ...


# Receives reply text as the model writes it, a chunk at a time, in order.
TextSink = Callable[[str], None]


@runtime_checkable
class StreamingProvider(Protocol):
    """A provider that can also hand over its reply text while it is written. The reply it
    returns is the one ``converse`` would, so a caller that streams saves the same turn."""

    def converse(self, request: ModelRequest) -> ModelReply: ...

    def converse_stream(self, request: ModelRequest, on_text: TextSink) -> ModelReply: ...


class ModelError(Exception):
    """A model call that failed; `status` is the HTTP status the turn answers with."""

    status = 502
    code = "model_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelThrottled(ModelError):
    status = 503
    code = "model_throttled"


class ModelUnavailable(ModelError):
    status = 503
    code = "model_unavailable"


class ModelTimeout(ModelError):
    status = 504
    code = "model_timeout"


class ModelRejected(ModelError):
    """The model refused the request as built (validation, access, unknown model)."""

    status = 502
    code = "model_rejected"
