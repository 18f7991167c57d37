"""One chat turn: read (at most three DynamoDB requests), ask the model, run its memory
tools, then save everything in one transaction. Also the clear-context marker and the
preview of what the next turn would send."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import ValidationError

from recall.domain import clock
from recall.domain.access import Role, require
from recall.domain.context import TurnContext, assemble, token_estimate, turn_context
from recall.domain.conversations import Conversation, title_from_message
from recall.domain.ids import is_id, new_id
from recall.domain.memory import MemoryEntry, render_memory_block
from recall.domain.messages import Message
from recall.domain.prompt import (
    ModelError,
    ModelProvider,
    ModelReply,
    ModelRequest,
    PromptMessage,
    ToolCall,
    ToolResult,
    Usage,
)
from recall.domain.session import Session, rebuilt, with_turn
from recall.domain.tools import FORGET_PREFERENCE, SAVE_PREFERENCE
from recall.errors import Conflict, DomainError, Invalid, ModelFailed, NotFound, TooLarge
from recall.observability import logger, metrics
from recall.services.memories import MemoryService
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.keys import thread_key as thread_of
from recall.store.memories import MemoryStore
from recall.store.messages import MessageStore
from recall.store.sessions import SessionStore
from recall.store.turns import SessionChanged, TurnReads, TurnStore

LATEST = "latest"


@dataclass
class Nudge:
    show: bool
    turns: int
    threshold: int


@dataclass
class TurnOutcome:
    conversation: Conversation
    created: bool
    message: Message
    user_message: Message
    memories_saved: list[MemoryEntry]
    memories_forgotten: list[str]
    nudge: Nudge
    usage: Usage


@dataclass
class _Round:
    calls: list[ToolCall]
    results: list[ToolResult]


@dataclass
class _Exchange:
    """What the model said during a turn, and what its tools did."""

    reply: ModelReply | None = None
    rounds: list[_Round] = field(default_factory=list)
    saved: list[MemoryEntry] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    failure: ModelError | None = None


@dataclass
class _Loaded:
    conversation: Conversation
    created: bool
    session: Session
    session_exists: bool
    context: TurnContext


class ChatService:
    def __init__(
        self,
        settings: Settings,
        turns: TurnStore,
        conversations: ConversationStore,
        messages: MessageStore,
        sessions: SessionStore,
        memories: MemoryStore,
        memory_service: MemoryService,
        provider_for: Callable[[str], ModelProvider],
    ) -> None:
        self._settings = settings
        self._turns = turns
        self._conversations = conversations
        self._messages = messages
        self._sessions = sessions
        self._memories = memories
        self._memory_service = memory_service
        self._provider_for = provider_for

    # The turn

    def turn(
        self,
        user_id: str,
        project_id: str,
        text: str,
        conversation_id: str | None,
        model: str | None,
    ) -> TurnOutcome:
        text = self._checked_message(text)
        model_id = self._checked_model(model)
        now = clock.now()
        loaded = self._load(user_id, project_id, conversation_id, text, now)
        request = assemble(
            loaded.context,
            text,
            model_id,
            self._settings.model_max_tokens,
            self._settings.model_temperature,
        )
        exchange = self._converse(request, user_id, project_id, loaded.conversation.conversation_id)
        user_message, assistant = self._save(user_id, project_id, loaded, text, model_id, exchange)
        turns = loaded.conversation.turn_count + 1
        metrics.add_metric(name="ChatTurns", unit=MetricUnit.Count, value=1)
        if exchange.failure is not None:
            metrics.add_metric(name="ChatTurnsFailed", unit=MetricUnit.Count, value=1)
            raise ModelFailed(
                exchange.failure.message,
                exchange.failure.status,
                exchange.failure.code,
                [
                    {
                        "conversationId": loaded.conversation.conversation_id,
                        "userMessageId": user_message.message_id,
                        "assistantMessageId": assistant.message_id,
                    }
                ],
            )
        return TurnOutcome(
            conversation=loaded.conversation,
            created=loaded.created,
            message=assistant,
            user_message=user_message,
            memories_saved=exchange.saved,
            memories_forgotten=exchange.forgotten,
            nudge=Nudge(
                show=turns > self._settings.nudge_threshold_turns,
                turns=turns,
                threshold=self._settings.nudge_threshold_turns,
            ),
            usage=exchange.usage,
        )

    def _load(
        self, user_id: str, project_id: str, conversation_id: str | None, text: str, now: datetime
    ) -> _Loaded:
        """Authorise and read: one batched read of project, role, thread and session, then
        memory once per scope. A new thread is created here, so its tools can use it."""
        if conversation_id == LATEST:
            latest = self._conversations.latest(user_id, project_id)
            conversation_id = latest.conversation_id if latest else None
        if conversation_id is not None:
            self._reject_unknown_id(user_id, project_id, conversation_id, Role.EDITOR)
        thread = thread_of(user_id, project_id, conversation_id) if conversation_id else None
        reads = self._turns.read(user_id, project_id, conversation_id, thread)
        require(reads.role, Role.EDITOR)
        if reads.project is None:
            raise NotFound("No such project.")
        conversation, created = self._conversation(
            reads, user_id, project_id, conversation_id, text, now
        )
        persistent, thread_entries = self._memories.active(
            user_id, project_id, None if created else conversation.conversation_id, now
        )
        session, exists = self._session_of(reads, conversation)
        context = turn_context(
            reads.project,
            render_memory_block(persistent, thread_entries, now),
            session.summary,
            session.window,
        )
        return _Loaded(conversation, created, session, exists, context)

    def _conversation(
        self,
        reads: TurnReads,
        user_id: str,
        project_id: str,
        conversation_id: str | None,
        text: str,
        now: datetime,
    ) -> tuple[Conversation, bool]:
        if conversation_id is not None:
            if reads.conversation is None:
                raise NotFound("No such conversation.")
            return reads.conversation, False
        at = clock.stamp(now)
        conversation = Conversation(
            user_id=user_id,
            project_id=project_id,
            conversation_id=new_id(),
            title=title_from_message(text, self._settings.title_max_chars),
            created_at=at,
            updated_at=at,
        )
        self._conversations.create(conversation)
        return conversation, True

    def _session_of(self, reads: TurnReads, conversation: Conversation) -> tuple[Session, bool]:
        """The thread's session, rebuilt from saved messages when it was pruned or never made."""
        if reads.session is not None:
            return reads.session, True
        if conversation.message_count == 0:
            return Session(cleared_after=conversation.cleared_after), False
        thread = thread_of(
            conversation.user_id, conversation.project_id, conversation.conversation_id
        )
        size = self._settings.window_messages
        recent = self._messages.latest_after(thread, conversation.cleared_after, size * 3)
        logger.info("session rebuilt", extra={"conversation_id": conversation.conversation_id})
        return Session(
            window=rebuilt(recent, conversation.cleared_after, size),
            cleared_after=conversation.cleared_after,
        ), False

    # The model and its tools

    def _converse(
        self, request: ModelRequest, user_id: str, project_id: str, conversation_id: str
    ) -> _Exchange:
        exchange = _Exchange()
        provider = self._provider_for(request.model_id)
        rounds_max = self._settings.tool_rounds_max
        try:
            for round_number in range(rounds_max + 1):
                tools_allowed = round_number < rounds_max
                sent = request if tools_allowed else request.model_copy(update={"tools": []})
                reply = provider.converse(sent)
                exchange.usage = exchange.usage + reply.usage
                if not (reply.tool_calls and tools_allowed):
                    exchange.reply = reply
                    break
                results = [
                    self._run_tool(call, user_id, project_id, conversation_id, exchange)
                    for call in reply.tool_calls
                ]
                exchange.rounds.append(_Round(reply.tool_calls, results))
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

    def _run_tool(
        self,
        call: ToolCall,
        user_id: str,
        project_id: str,
        conversation_id: str,
        exchange: _Exchange,
    ) -> ToolResult:
        """Memory tools write explicit entries and cost nothing; a bad call is an error the
        model reads, never a failed turn."""
        try:
            if call.name == SAVE_PREFERENCE:
                entry = self._memory_service.save_explicit(
                    user_id,
                    project_id,
                    conversation_id,
                    str(call.input["key"]),
                    str(call.input["value"]),
                    str(call.input["category"]),
                    str(call.input.get("scope", "persistent")),
                )
                exchange.saved.append(entry)
                return ToolResult(
                    tool_call_id=call.id,
                    content=json.dumps({"saved": entry.key, "scope": entry.scope}),
                )
            if call.name == FORGET_PREFERENCE:
                key = str(call.input["key"])
                scope = str(call.input.get("scope", "persistent"))
                if self._memory_service.forget_explicit(
                    user_id, project_id, conversation_id, key, scope
                ):
                    exchange.forgotten.append(key)
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

    # Saving

    def _save(
        self,
        user_id: str,
        project_id: str,
        loaded: _Loaded,
        text: str,
        model_id: str,
        exchange: _Exchange,
    ) -> tuple[Message, Message]:
        """One transaction; when another turn on the thread saved first, re-read its session
        and save again with fresh ids, so both turns land in order."""
        conversation = loaded.conversation
        thread = thread_of(user_id, project_id, conversation.conversation_id)
        session, exists = loaded.session, loaded.session_exists
        for attempt in range(self._settings.turn_retry_max):
            saved = self._messages_of(text, model_id, exchange)
            at = clock.stamp(clock.now())
            next_session = with_turn(
                session,
                saved,
                self._settings.window_messages,
                self._settings.window_max_bytes,
            ).model_copy(update={"updated_at": at})
            items: list[dict[str, Any]] = [
                {"Put": self._messages.put_request(thread, message)} for message in saved
            ]
            expected = session.version if exists else None
            items.append({"Put": self._sessions.put_request(thread, next_session, expected)})
            items.append(
                {
                    "Update": self._conversations.turn_update_request(
                        conversation, len(saved), model_id, at
                    )
                }
            )
            if not exists:
                # A new session item: the consolidation gate counts sessions.
                items.append(
                    {"Update": self._memories.session_started_request(user_id, project_id)}
                )
            try:
                self._turns.write(
                    items, session_index=len(saved), conversation_index=len(saved) + 1
                )
            except SessionChanged:
                logger.info("turn raced another; retrying", extra={"attempt": attempt + 1})
                current = self._sessions.get(thread)
                session, exists = (current, True) if current else (Session(), False)
                continue
            return saved[0], saved[-1]
        raise Conflict("The conversation is too busy; try again.")

    def _messages_of(self, text: str, model_id: str, exchange: _Exchange) -> list[Message]:
        at = clock.stamp(clock.now())
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
        if exchange.failure is not None:
            saved.append(
                Message(
                    message_id=new_id(),
                    role="assistant",
                    content="",
                    tool_calls=calls,
                    model=model_id,
                    status="error",
                    error=exchange.failure.message,
                    usage=exchange.usage,
                    created_at=at,
                )
            )
        else:
            assert exchange.reply is not None
            saved.append(
                Message(
                    message_id=new_id(),
                    role="assistant",
                    content=exchange.reply.text,
                    tool_calls=calls,
                    model=model_id,
                    usage=exchange.usage,
                    created_at=at,
                )
            )
        return saved

    # Clear context and preview

    def clear_context(self, user_id: str, project_id: str, conversation_id: str) -> str:
        """Later turns start their window after this point; history and memory stay. The
        marker is kept on the thread too, so it outlives a pruned session."""
        reads = self._read_owned(user_id, project_id, conversation_id, Role.EDITOR)
        thread = thread_of(user_id, project_id, conversation_id)
        marker = new_id()
        self._conversations.mark_cleared(user_id, project_id, conversation_id, marker)
        current = reads.session
        for _ in range(self._settings.turn_retry_max):
            base = current or Session()
            cleared = base.model_copy(
                update={
                    "window": [],
                    "cleared_after": marker,
                    "version": base.version + 1,
                    "updated_at": clock.stamp(clock.now()),
                }
            )
            try:
                self._sessions.put(thread, cleared, base.version if current else None)
                return marker
            except Conflict:
                current = self._sessions.get(thread)
        raise Conflict("The conversation is too busy; try again.")

    def preview(
        self, user_id: str, project_id: str, conversation_id: str
    ) -> tuple[TurnContext, ModelRequest, int]:
        """Exactly what the next turn would send, with the new message left empty."""
        now = clock.now()
        reads = self._read_owned(user_id, project_id, conversation_id, Role.VIEWER)
        assert reads.conversation is not None and reads.project is not None
        persistent, thread_entries = self._memories.active(
            user_id, project_id, conversation_id, now
        )
        session, _ = self._session_of(reads, reads.conversation)
        context = turn_context(
            reads.project,
            render_memory_block(persistent, thread_entries, now),
            session.summary,
            session.window,
        )
        request = assemble(
            context,
            "",
            self._settings.default_model_id,
            self._settings.model_max_tokens,
            self._settings.model_temperature,
        )
        request = request.model_copy(update={"messages": request.messages[:-1]})
        return context, request, token_estimate(request)

    def _read_owned(
        self, user_id: str, project_id: str, conversation_id: str, needed: Role
    ) -> TurnReads:
        self._reject_unknown_id(user_id, project_id, conversation_id, needed)
        reads = self._turns.read(
            user_id, project_id, conversation_id, thread_of(user_id, project_id, conversation_id)
        )
        require(reads.role, needed)
        if reads.project is None or reads.conversation is None:
            raise NotFound("No such conversation.")
        return reads

    def _reject_unknown_id(
        self, user_id: str, project_id: str, conversation_id: str, needed: Role
    ) -> None:
        """An id no thread could have is 404, but only once the caller's role is checked,
        so a stranger still gets 403."""
        if not is_id(conversation_id):
            require(self._turns.read(user_id, project_id, None, None).role, needed)
            raise NotFound("No such conversation.")

    # Input checks

    def _checked_message(self, text: str) -> str:
        stripped = text.strip()
        if not stripped:
            raise Invalid(
                "A message needs some text.", [{"field": "message", "message": "must not be blank"}]
            )
        if len(stripped) > self._settings.message_max_chars:
            raise TooLarge(
                f"A message is at most {self._settings.message_max_chars} characters.",
                [
                    {
                        "field": "message",
                        "message": f"at most {self._settings.message_max_chars} characters",
                    }
                ],
            )
        return stripped

    def _checked_model(self, model: str | None) -> str:
        if model is None:
            return self._settings.default_model_id
        if not self._settings.model_allowed(model):
            raise Invalid(
                "That model is not allowed here.",
                [
                    {
                        "field": "model",
                        "message": "one of: " + ", ".join(self._settings.allowed_model_ids),
                    }
                ],
            )
        return model
