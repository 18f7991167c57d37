"""The model and its memory tools: ask, run the tool calls, ask again with their results,
until the model answers in text or the rounds run out."""

from __future__ import annotations

from collections.abc import Callable
import json
import time

from pydantic import ValidationError

from recall.domain.conversations import Conversation
from recall.domain.prompt import (
    ModelError,
    ModelProvider,
    ModelReply,
    ModelRequest,
    ModelThrottled,
    ModelTimeout,
    ModelUnavailable,
    PromptMessage,
    StreamingProvider,
    ToolCall,
    ToolResult,
)
from recall.domain.tools import FORGET_PREFERENCE, SAVE_PREFERENCE
from recall.domain.turn_events import ToolOutcome, TurnListener
from recall.domain.turn_memory import TurnMemory
from recall.domain.turns import Exchange, ToolRound
from recall.errors import DomainError
from recall.observability import logger
from recall.retry import backoff_seconds
from recall.services.memories import MemoryService

# A call with less time than this left is not made: it could not finish.
CALL_SECONDS_MIN = 1.0


class ToolLoop:
    def __init__(
        self,
        provider_for: Callable[[str], ModelProvider],
        memory: MemoryService,
        rounds_max: int,
        attempts: int = 1,
        retry_base_seconds: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._provider_for = provider_for
        self._memory = memory
        self._rounds_max = rounds_max
        self._attempts = attempts
        self._retry_base_seconds = retry_base_seconds
        self._monotonic = monotonic
        self._sleep = sleep

    def converse(
        self,
        request: ModelRequest,
        memory: TurnMemory,
        conversation_id: str,
        listener: TurnListener | None = None,
        deadline: float | None = None,
    ) -> Exchange:
        """Never raises for the model's sake: a failure is kept on the exchange, so the
        turn still saves the user's message. The tools' memory changes are held in
        ``memory`` until the turn saves them with its messages. A ``listener`` hears the
        reply text as it is written and each tool call as it runs. With a ``deadline``
        (``monotonic`` seconds), every round and retry ends by then, or the turn fails
        as a model timeout, so it still saves before its caller stops waiting."""
        exchange = Exchange()
        provider = self._provider_for(request.model_id)
        try:
            for round_number in range(self._rounds_max + 1):
                tools_allowed = round_number < self._rounds_max
                sent = (
                    request
                    if tools_allowed
                    else request.model_copy(update={"tools": [], "tool_choice": None})
                )
                reply = self._ask_within(provider, sent, listener, deadline)
                exchange.usage = exchange.usage + reply.usage
                if not (reply.tool_calls and tools_allowed):
                    exchange.reply = reply
                    break
                results = []
                for call in reply.tool_calls:
                    result = self._run(call, memory, conversation_id)
                    results.append(result)
                    if listener is not None:
                        key = call.input.get("key")
                        listener.tool(
                            call.name, key if isinstance(key, str) else None, _outcome(call, result)
                        )
                exchange.rounds.append(ToolRound(reply.tool_calls, results))
                if reply.stop_reason != "tool_use":
                    exchange.reply = reply
                    break
                request = request.model_copy(
                    update={
                        "messages": [
                            *request.messages,
                            PromptMessage(
                                role="assistant", text=reply.text, tool_calls=reply.tool_calls
                            ),
                            PromptMessage(role="user", tool_results=results),
                        ]
                    }
                )
        except ModelError as error:
            exchange.failure = error
        except Exception as error:  # a provider bug must not lose the user's message
            logger.exception("model call failed unexpectedly")
            exchange.failure = ModelError(f"The model call failed ({type(error).__name__}).")
        if exchange.failure is not None:
            logger.warning(
                "model failed",
                extra={"code": exchange.failure.code, "error": exchange.failure.message},
            )
        return exchange

    def _ask_within(
        self,
        provider: ModelProvider,
        request: ModelRequest,
        listener: TurnListener | None,
        deadline: float | None,
    ) -> ModelReply:
        """One round by the deadline: each call gets the time left, and a throttled or
        unavailable model is asked again (up to ``attempts``, backing off) while time is
        left and nothing of the reply has been heard yet."""
        if deadline is None:
            return _ask(provider, request, listener)
        heard = _Heard(listener)
        for attempt in range(1, self._attempts + 1):
            left = deadline - self._monotonic()
            if left < CALL_SECONDS_MIN:
                raise ModelTimeout("The model did not answer within this turn's time.")
            try:
                return _ask(
                    provider,
                    request.model_copy(update={"timeout_seconds": left}),
                    heard if listener is not None else None,
                )
            except (ModelThrottled, ModelUnavailable):
                pause = backoff_seconds(attempt - 1, self._retry_base_seconds)
                time_after = deadline - self._monotonic() - pause
                if attempt == self._attempts or heard.any or time_after < CALL_SECONDS_MIN:
                    raise
                self._sleep(pause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _run(self, call: ToolCall, memory: TurnMemory, conversation_id: str) -> ToolResult:
        """Memory tools change explicit entries and cost nothing; a bad call is an error the
        model reads, never a failed turn."""
        try:
            if call.name == SAVE_PREFERENCE:
                entry = self._memory.tool_entry(
                    conversation_id,
                    str(call.input["key"]),
                    str(call.input["value"]),
                    str(call.input["category"]),
                    str(call.input.get("scope", "persistent")),
                )
                memory.save(entry)
                return ToolResult(
                    tool_call_id=call.id,
                    content=json.dumps({"saved": entry.key, "scope": entry.scope}),
                )
            if call.name == FORGET_PREFERENCE:
                key, thread = self._memory.tool_place(
                    conversation_id,
                    str(call.input["key"]),
                    str(call.input.get("scope", "persistent")),
                )
                if memory.forget(key, thread):
                    return ToolResult(tool_call_id=call.id, content=json.dumps({"forgotten": key}))
                return ToolResult(
                    tool_call_id=call.id,
                    content=f"No memory entry {key!r} to forget.",
                    is_error=True,
                )
            return ToolResult(
                tool_call_id=call.id, content=f"Unknown tool {call.name!r}.", is_error=True
            )
        except (DomainError, KeyError, ValidationError, ValueError) as error:
            reason = error.message if isinstance(error, DomainError) else f"invalid input ({error})"
            return ToolResult(tool_call_id=call.id, content=reason, is_error=True)


class _Heard:
    """A listener that remembers whether any text reached it: a retry after some reply
    text was streamed would send the client that text twice."""

    def __init__(self, listener: TurnListener | None) -> None:
        self._listener = listener
        self.any = False

    def started(self, conversation: Conversation, created: bool) -> None:
        if self._listener is not None:
            self._listener.started(conversation, created)

    def text(self, chunk: str) -> None:
        self.any = True
        if self._listener is not None:
            self._listener.text(chunk)

    def tool(self, name: str, key: str | None, outcome: ToolOutcome) -> None:
        if self._listener is not None:
            self._listener.tool(name, key, outcome)


def _ask(
    provider: ModelProvider, request: ModelRequest, listener: TurnListener | None
) -> ModelReply:
    """One round: streamed to the listener when there is one (whole, when the provider
    cannot stream), else a plain call."""
    if listener is None:
        return provider.converse(request)
    if isinstance(provider, StreamingProvider):
        return provider.converse_stream(request, listener.text)
    reply = provider.converse(request)
    if reply.text:
        listener.text(reply.text)
    return reply


def _outcome(call: ToolCall, result: ToolResult) -> ToolOutcome:
    if result.is_error:
        return "refused"
    return "forgotten" if call.name == FORGET_PREFERENCE else "saved"
