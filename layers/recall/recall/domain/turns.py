"""The rules of one chat turn that need no store: what a client may send, what the model
and its tools did, and the messages the turn saves."""

from __future__ import annotations

from dataclasses import dataclass, field
import json

from recall.domain.ids import new_id
from recall.domain.memory import Scope, shows_something
from recall.domain.messages import Message
from recall.domain.numbers import with_storable_numbers
from recall.domain.presets import model_choices
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
        # The same shape as a setting's refusal: every model a turn may name, the default too.
        raise Invalid(
            "That model is not allowed here.",
            [
                {
                    "field": "model",
                    "message": "not an allowed model",
                    "allowed": model_choices(default, allowed),
                }
            ],
        )
    return model


def _json_size(message: Message) -> int:
    """The message as ASCII JSON: never fewer bytes than DynamoDB counts for it (a
    character is at least as many JSON bytes as UTF-8 bytes), and what the idempotency
    record that keeps the reply stores."""
    return len(json.dumps(message.model_dump(mode="json", exclude_none=True)))


def _cut(message: Message, field_name: str, max_bytes: int) -> Message:
    """``message`` with the text of ``field_name`` cut, at a character, to fit."""
    text = getattr(message, field_name) or ""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if _json_size(message.model_copy(update={field_name: text[:middle]})) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return message.model_copy(update={field_name: text[:low]})


def fitted(message: Message, max_bytes: int) -> Message:
    """A message the model made, cut to ``max_bytes`` so its item, the window and the
    recorded reply stay under DynamoDB's 400 KB whatever the model returned. What goes
    first is what the message needs least: tool-call inputs beyond their key (the calls
    have run; the memory history keeps what they wrote), then tool results' text, then the
    calls themselves, then the error and the reply's text."""
    if _json_size(message) <= max_bytes:
        return message
    calls = [
        call.model_copy(
            update={"input": {"key": key} if isinstance(key := call.input.get("key"), str) else {}}
        )
        for call in message.tool_calls
    ]
    message = message.model_copy(update={"tool_calls": calls})
    if _json_size(message) > max_bytes:
        results = [
            result.model_copy(update={"content": result.content[:200]})
            for result in message.tool_results
        ]
        message = message.model_copy(update={"tool_results": results})
    if _json_size(message) > max_bytes:
        message = message.model_copy(update={"tool_calls": [], "tool_results": []})
    for field_name in ("error", "content"):
        if getattr(message, field_name) and _json_size(message) > max_bytes:
            message = _cut(message, field_name, max_bytes)
    return message


def with_unsaved(exchange: Exchange, unsaved: list[tuple[str, str | None]]) -> Exchange:
    """The exchange as the turn really ends when entries its tools saved cannot land (each
    ``(key, conversation_id)``: their scope filled while the model ran): each such save's
    result becomes a refusal, and the reply ends with a note naming them, so neither the
    saved thread nor the answer claims a save that did not happen. The model's own words
    are kept as it wrote them."""
    if not unsaved:
        return exchange
    places = {(key, conversation_id is not None) for key, conversation_id in unsaved}
    rounds = [
        ToolRound(
            round_.calls,
            [
                _refused(result) if _saved_place(result) in places else result
                for result in round_.results
            ],
        )
        for round_ in exchange.rounds
    ]
    keys = ", ".join(dict.fromkeys(key for key, _ in unsaved))
    note = (
        f"Not saved after all, memory is full: {keys}. Forget or update an entry, then ask again."
    )
    reply = exchange.reply or ModelReply()
    text = f"{reply.text}\n\n{note}" if reply.text else note
    return Exchange(
        reply=reply.model_copy(update={"text": text}),
        rounds=rounds,
        usage=exchange.usage,
        failure=exchange.failure,
    )


def _saved_place(result: ToolResult) -> tuple[str, bool] | None:
    """The key a save's result names, and whether it is a thread's: ``None`` for any other
    result (a refusal, a forget)."""
    if result.is_error:
        return None
    try:
        said = json.loads(result.content)
    except ValueError:
        return None
    if not isinstance(said, dict) or not isinstance(said.get("saved"), str):
        return None
    return said["saved"], said.get("scope") == Scope.THREAD


def _refused(result: ToolResult) -> ToolResult:
    key = _saved_place(result)
    name = key[0] if key else ""
    return result.model_copy(
        update={
            "content": f"Memory is full: {name!r} was not saved. "
            "Update or forget an entry before adding it.",
            "is_error": True,
        }
    )


def _storable(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls with any number in their input that DynamoDB cannot hold kept as its text:
    the model's input is saved as near as it can be, and never fails the turn's save."""
    return [call.model_copy(update={"input": with_storable_numbers(call.input)}) for call in calls]


def turn_messages(
    text: str, model_id: str, exchange: Exchange, at: str, max_bytes: int
) -> list[Message]:
    """The user's message, one tool message per tool round, then the reply (or, when the
    model failed, an assistant message with status ``error`` and the error text), each
    with a fresh time-ordered id. What the model made is ``fitted`` to ``max_bytes``; the
    user's message is already bounded by ``MESSAGE_MAX_CHARS``."""
    saved = [Message(message_id=new_id(), role="user", content=text, created_at=at)]
    for round_ in exchange.rounds:
        saved.append(
            fitted(
                Message(
                    message_id=new_id(),
                    role="tool",
                    content=", ".join(
                        f"{call.name} {call.input.get('key', '')}".strip() for call in round_.calls
                    ),
                    tool_calls=_storable(round_.calls),
                    tool_results=round_.results,
                    model=model_id,
                    created_at=at,
                ),
                max_bytes,
            )
        )
    calls = _storable([call for round_ in exchange.rounds for call in round_.calls])
    failure = exchange.failure
    reply = exchange.reply
    saved.append(
        fitted(
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
            ),
            max_bytes,
        )
    )
    return saved
