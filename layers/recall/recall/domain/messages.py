"""Messages of a thread, as saved and as replayed into the window."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from recall.domain.prompt import ToolCall, ToolResult, Usage

MessageRole = Literal["user", "assistant", "system", "tool"]
MessageStatus = Literal["complete", "error"]


class Message(BaseModel):
    message_id: str
    role: MessageRole
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)
    model: str | None = None
    status: MessageStatus = "complete"
    error: str | None = None
    usage: Usage | None = None
    created_at: str
