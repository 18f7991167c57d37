"""One chat turn: load (one batched read, then memory once per scope), ask the model and
run its memory tools, then save everything in one transaction, retried in order when
another turn on the thread saved first."""

from __future__ import annotations

from dataclasses import dataclass

from aws_lambda_powertools.metrics import MetricUnit

from recall.domain import clock
from recall.domain.context import assemble
from recall.domain.conversations import Conversation
from recall.domain.memory import MemoryEntry
from recall.domain.messages import Message
from recall.domain.prompt import Usage
from recall.domain.session import Session, with_turn
from recall.domain.turns import Exchange, checked_message, checked_model, turn_messages
from recall.errors import Conflict, ModelFailed, NotFound
from recall.observability import logger, metrics
from recall.services.followups import TurnFollowUps
from recall.services.tool_loop import ToolLoop
from recall.services.turn_context import LoadedTurn, TurnContextLoader
from recall.settings import Settings
from recall.store.sessions import SessionStore
from recall.store.turns import ConversationChanged, SavedTurn, SessionChanged, TurnStore


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


class ChatService:
    def __init__(
        self,
        settings: Settings,
        loader: TurnContextLoader,
        tools: ToolLoop,
        turns: TurnStore,
        sessions: SessionStore,
        followups: TurnFollowUps,
    ) -> None:
        self._settings = settings
        self._loader = loader
        self._tools = tools
        self._turns = turns
        self._sessions = sessions
        self._followups = followups

    def turn(
        self,
        user_id: str,
        project_id: str,
        text: str,
        conversation_id: str | None,
        model: str | None,
    ) -> TurnOutcome:
        settings = self._settings
        text = checked_message(text, settings.message_max_chars)
        model_id = checked_model(model, settings.default_model_id, settings.allowed_model_ids)
        loaded = self._loader.for_turn(user_id, project_id, conversation_id, text, clock.now())
        conversation = loaded.conversation
        request = assemble(
            loaded.context, text, model_id, settings.model_max_tokens, settings.model_temperature
        )
        exchange = self._tools.converse(request, user_id, project_id, conversation.conversation_id)
        try:
            saved, left_window = self._save(loaded, text, model_id, exchange)
        except NotFound:
            # The thread was deleted while the model ran: the delete may have swept thread
            # memory before the tools wrote theirs.
            self._tools.discard_thread_writes(user_id, project_id, conversation.conversation_id)
            raise
        self._followups.queue(
            self._followups.jobs_after(
                conversation,
                conversation.message_count + len(saved),
                text,
                left_window,
            )
        )
        user_message, assistant = saved[0], saved[-1]
        metrics.add_metric(name="ChatTurns", unit=MetricUnit.Count, value=1)
        if exchange.failure is not None:
            metrics.add_metric(name="ChatTurnsFailed", unit=MetricUnit.Count, value=1)
            raise ModelFailed(
                exchange.failure.message,
                exchange.failure.status,
                exchange.failure.code,
                [
                    {
                        "conversationId": conversation.conversation_id,
                        "userMessageId": user_message.message_id,
                        "assistantMessageId": assistant.message_id,
                    }
                ],
            )
        turns = conversation.turn_count + 1
        threshold = settings.nudge_threshold_turns
        return TurnOutcome(
            conversation=conversation,
            created=loaded.created,
            message=assistant,
            user_message=user_message,
            memories_saved=exchange.saved,
            memories_forgotten=exchange.forgotten,
            nudge=Nudge(show=turns > threshold, turns=turns, threshold=threshold),
            usage=exchange.usage,
        )

    def _save(
        self, loaded: LoadedTurn, text: str, model_id: str, exchange: Exchange
    ) -> tuple[list[Message], bool]:
        """One transaction; when another turn on the thread saved first, re-read its session
        and save again with fresh ids, so both turns land in order. Also says whether
        messages left the window (a summary has something to fold)."""
        conversation = loaded.conversation
        session, exists = loaded.session, loaded.session_exists
        for attempt in range(self._settings.turn_retry_max):
            at = clock.stamp(clock.now())
            saved = turn_messages(
                text, model_id, exchange, at, self._settings.model_message_max_bytes
            )
            next_session = with_turn(
                session, saved, self._settings.window_messages, self._settings.window_max_bytes
            ).model_copy(update={"updated_at": at})
            try:
                self._turns.save(
                    SavedTurn(
                        conversation=conversation,
                        messages=saved,
                        session=next_session,
                        expected_version=session.version if exists else None,
                        model_id=model_id,
                        at=at,
                    )
                )
            except ConversationChanged as changed:
                logger.info("thread changed during the turn; saving again")
                conversation = changed.conversation
                continue
            except SessionChanged:
                logger.info("turn raced another; retrying", extra={"attempt": attempt + 1})
                current = self._sessions.get(
                    conversation.user_id, conversation.project_id, conversation.conversation_id
                )
                session, exists = (current, True) if current else (Session(), False)
                continue
            kept = {message.message_id for message in next_session.window}
            left = any(message.message_id not in kept for message in session.window)
            return saved, left
        raise Conflict("The conversation is too busy; try again.")
