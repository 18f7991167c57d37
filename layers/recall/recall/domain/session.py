"""The active window of one thread: what the model sees of the conversation."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from recall.domain.messages import Message
from recall.domain.prompt import PromptMessage


class Session(BaseModel):
    """One per thread: the last messages after the clear-context marker and a version for
    optimistic locking. A missing session is rebuilt; the rolling summary of what fell out
    lives on the conversation, so pruning a session never loses it."""

    window: list[Message] = Field(default_factory=list)
    cleared_after: str | None = None
    version: int = 0
    updated_at: str | None = None


def belongs_in_window(message: Message) -> bool:
    """User messages and complete assistant replies; tool rounds and failed replies stay in
    the saved history only (a failed reply's text is an error, not something the model said)."""
    if message.role == "user":
        return True
    return message.role == "assistant" and message.status == "complete"


def trimmed(window: list[Message], size: int, max_bytes: int) -> list[Message]:
    """The newest ``size`` messages that also fit in ``max_bytes`` of JSON."""
    kept = window[-size:] if size > 0 else []
    while kept and len(json.dumps([m.model_dump() for m in kept])) > max_bytes:
        kept = kept[1:]
    return kept


def rebuilt(messages: list[Message], cleared_after: str | None, size: int) -> list[Message]:
    """The window of a thread whose session was pruned, from its saved messages."""
    return [
        message
        for message in messages
        if belongs_in_window(message)
        and (cleared_after is None or message.message_id > cleared_after)
    ][-size:]


def with_turn(session: Session, added: list[Message], size: int, max_bytes: int) -> Session:
    window = session.window + [message for message in added if belongs_in_window(message)]
    return session.model_copy(
        update={"window": trimmed(window, size, max_bytes), "version": session.version + 1}
    )


def as_prompt(window: list[Message]) -> list[PromptMessage]:
    return [
        PromptMessage(role="user" if message.role == "user" else "assistant", text=message.content)
        for message in window
    ]
