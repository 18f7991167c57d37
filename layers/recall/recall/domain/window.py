"""The active window of one thread: what the model sees of the conversation. It is not
stored whole: the thread keeps where it starts, and each turn reads it from the saved
messages and moves that start."""

from __future__ import annotations

from recall.domain.messages import Message
from recall.domain.prompt import PromptMessage
from recall.domain.sizes import stored_size


def belongs_in_window(message: Message) -> bool:
    """User messages and complete assistant replies; tool rounds and failed replies stay in
    the saved history only (a failed reply's text is an error, not something the model said)."""
    if message.role == "user":
        return True
    return message.role == "assistant" and message.status == "complete"


def trimmed(window: list[Message], size: int, max_bytes: int) -> list[Message]:
    """The newest ``size`` messages that also fit in ``max_bytes`` by DynamoDB's size rules,
    so the prompt stays bounded however long the messages are."""
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


def window_of(
    newest: list[Message],
    start: str | None,
    cleared_after: str | None,
    size: int,
    max_bytes: int,
) -> list[Message]:
    """The window within the thread's newest messages (oldest first): those from ``start``
    on and after the clear-context marker that belong in it, within ``max_bytes``. A thread
    no turn has given a start yet (one saved before starts were kept) takes the newest
    ``size``, the count a window keeps right after it drops."""
    window = [
        message
        for message in newest
        if belongs_in_window(message)
        and (start is None or message.message_id >= start)
        and (cleared_after is None or message.message_id > cleared_after)
    ]
    return trimmed(window, size if start is None else len(window), max_bytes)


def next_window(
    window: list[Message], added: list[Message], size: int, max_bytes: int, evict_step: int
) -> list[Message]:
    """The window after a turn: its messages join, older ones leave ``evict_step`` at a
    time (``evicted``), and it always fits ``max_bytes``."""
    grown = evicted(
        window + [message for message in added if belongs_in_window(message)], size, evict_step
    )
    return trimmed(grown, len(grown), max_bytes)


def as_prompt(window: list[Message]) -> list[PromptMessage]:
    return [
        PromptMessage(role="user" if message.role == "user" else "assistant", text=message.content)
        for message in window
    ]
