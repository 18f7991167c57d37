"""The active window of one thread: what the model sees of the conversation."""

from __future__ import annotations

from pydantic import BaseModel, Field

from recall.domain.messages import Message
from recall.domain.prompt import PromptMessage
from recall.domain.sizes import stored_size


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


def window_size(window: list[Message]) -> int:
    """The bytes DynamoDB counts for the window as the session item stores it: each
    message with its tool calls, usage and every other field it has."""
    return stored_size([message.model_dump(exclude_none=True) for message in window])


def trimmed(window: list[Message], size: int, max_bytes: int) -> list[Message]:
    """The newest ``size`` messages that also fit in ``max_bytes`` by DynamoDB's size rules,
    so the session item stays under DynamoDB's 400 KB however long the messages are."""
    kept = window[-size:] if size > 0 else []
    sizes = [stored_size(message.model_dump(exclude_none=True)) + 1 for message in kept]
    total = 3 + sum(sizes)
    while kept and total > max_bytes:
        total -= sizes.pop(0)
        kept = kept[1:]
    return kept


def evicted(window: list[Message], size: int, step: int) -> list[Message]:
    """At least ``size`` messages, and older ones leave ``step`` at a time: once the window
    would pass ``size + step`` it drops back to ``size``. Its first message then stays put
    for several turns, so the model's cached prompt prefix keeps matching; the price is up
    to ``step`` more messages in the prompt. A step of 0 slides the window every turn."""
    if len(window) <= size + max(step, 0):
        return window
    return window[-size:] if size > 0 else []


def rebuilt(
    messages: list[Message], cleared_after: str | None, size: int, max_bytes: int
) -> list[Message]:
    """The window of a thread whose session was pruned, from its saved messages: the count
    and bytes a live session's window keeps right after it drops, so the model sees the same
    either way (a pruned session's cache is long gone)."""
    return trimmed(
        [
            message
            for message in messages
            if belongs_in_window(message)
            and (cleared_after is None or message.message_id > cleared_after)
        ],
        size,
        max_bytes,
    )


def with_turn(
    session: Session, added: list[Message], size: int, max_bytes: int, evict_step: int
) -> Session:
    """The session after a turn: its messages join the window, which drops older messages
    ``evict_step`` at a time (``evicted``) and always fits ``max_bytes``."""
    window = evicted(
        session.window + [message for message in added if belongs_in_window(message)],
        size,
        evict_step,
    )
    return session.model_copy(
        update={"window": trimmed(window, len(window), max_bytes), "version": session.version + 1}
    )


def as_prompt(window: list[Message]) -> list[PromptMessage]:
    return [
        PromptMessage(role="user" if message.role == "user" else "assistant", text=message.content)
        for message in window
    ]
