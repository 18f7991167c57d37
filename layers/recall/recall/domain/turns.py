"""The rules of one chat turn that need no store: what a client may send, what the model
and its tools did, and the messages the turn saves."""

from __future__ import annotations

from dataclasses import dataclass, field

from recall.domain.ids import new_id
from recall.domain.memory import shows_something
from recall.domain.messages import Message
from recall.domain.prompt import ModelError, ModelReply, ToolCall, ToolResult, Usage
from recall.errors import Invalid, TooLarge

LATEST = "latest"


@dataclass
class ToolRound:
    calls: list[ToolCall]
    results: list[ToolResult]


@dataclass
class Exchange:
    """What the model said during a turn, and what its tools did."""

    reply: ModelReply | None = None
    rounds: list[ToolRound] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    failure: ModelError | None = None


def checked_message(text: str, max_chars: int) -> str:
    """The message without surrounding blanks; blank is a 422, over the limit a 413."""
    stripped = text.strip()
    if not shows_something(stripped):
        raise Invalid(
            "A message needs some text.", [{"field": "message", "message": "must not be blank"}]
        )
    if len(stripped) > max_chars:
        raise TooLarge(
            f"A message is at most {max_chars} characters.",
            [{"field": "message", "message": f"at most {max_chars} characters"}],
        )
    return stripped


def checked_model(model: str | None, default: str, allowed: tuple[str, ...]) -> str:
    if model is None:
        return default
    if model != default and model not in allowed:
        raise Invalid(
            "That model is not allowed here.",
            [{"field": "model", "message": "one of: " + ", ".join(allowed)}],
        )
    return model


def turn_messages(text: str, model_id: str, exchange: Exchange, at: str) -> list[Message]:
    """The user's message, one tool message per tool round, then the reply (or, when the
    model failed, an assistant message with status ``error`` and the error text), each
    with a fresh time-ordered id."""
    saved = [Message(message_id=new_id(), role="user", content=text, created_at=at)]
    for round_ in exchange.rounds:
        saved.append(
            Message(
                message_id=new_id(),
                role="tool",
                content=", ".join(
                    f"{call.name} {call.input.get('key', '')}".strip() for call in round_.calls
                ),
                tool_calls=round_.calls,
                tool_results=round_.results,
                model=model_id,
                created_at=at,
            )
        )
    calls = [call for round_ in exchange.rounds for call in round_.calls]
    failure = exchange.failure
    reply = exchange.reply
    saved.append(
        Message(
            message_id=new_id(),
            role="assistant",
            content=reply.text if failure is None and reply is not None else "",
            tool_calls=calls,
            model=model_id,
            status="error" if failure is not None else "complete",
            error=failure.message if failure is not None else None,
            usage=exchange.usage,
            created_at=at,
        )
    )
    return saved
