"""The model and its memory tools: ask, run the tool calls, ask again with their results,
until the model answers in text or the rounds run out."""

from __future__ import annotations

from collections.abc import Callable
import json

from pydantic import ValidationError

from recall.domain.prompt import (
    ModelError,
    ModelProvider,
    ModelReply,
    ModelRequest,
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
from recall.services.memories import MemoryService


class ToolLoop:
    def __init__(
        self,
        provider_for: Callable[[str], ModelProvider],
        memory: MemoryService,
        rounds_max: int,
    ) -> None:
        self._provider_for = provider_for
        self._memory = memory
        self._rounds_max = rounds_max

    def converse(
        self,
        request: ModelRequest,
        memory: TurnMemory,
        conversation_id: str,
        listener: TurnListener | None = None,
    ) -> Exchange:
        """Never raises for the model's sake: a failure is kept on the exchange, so the
        turn still saves the user's message. The tools' memory changes are held in
        ``memory`` until the turn saves them with its messages. A ``listener`` hears the
        reply text as it is written and each tool call as it runs."""
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
                reply = _ask(provider, sent, listener)
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
