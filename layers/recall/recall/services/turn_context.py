"""Loading what a turn needs, for the turn and for the preview of the next one alike:
authorise, read project, role, thread and session in one batched request, read memory once
per scope, rebuild a pruned session from saved messages, and assemble the context."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from recall.domain import clock
from recall.domain.access import Role, require
from recall.domain.context import TurnContext, turn_context
from recall.domain.conversations import Conversation, title_from_message
from recall.domain.ids import is_id, new_id
from recall.domain.memory import render_memory_block
from recall.domain.session import Session, rebuilt
from recall.domain.turns import LATEST
from recall.errors import NotFound
from recall.observability import logger
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.memories import HeldMemory, MemoryStore
from recall.store.messages import MessageStore
from recall.store.turns import TurnReads, TurnStore


@dataclass
class LoadedTurn:
    conversation: Conversation
    created: bool
    session: Session
    session_exists: bool
    context: TurnContext
    memory: HeldMemory


class TurnContextLoader:
    def __init__(
        self,
        settings: Settings,
        turns: TurnStore,
        conversations: ConversationStore,
        messages: MessageStore,
        memories: MemoryStore,
    ) -> None:
        self._settings = settings
        self._turns = turns
        self._conversations = conversations
        self._messages = messages
        self._memories = memories

    def for_turn(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str | None,
        first_message: str,
        now: datetime,
    ) -> LoadedTurn:
        """An editor's thread, ``latest``, or a new thread titled from ``first_message``
        (created here, so the turn's tools can write thread memory into it)."""
        if conversation_id == LATEST:
            latest = self._conversations.latest(user_id, project_id)
            conversation_id = latest.conversation_id if latest else None
        if conversation_id is None:
            reads = self.authorised(user_id, project_id, None, Role.EDITOR)
            at = clock.stamp(now)
            conversation = Conversation(
                user_id=user_id,
                project_id=project_id,
                conversation_id=new_id(),
                title=title_from_message(first_message, self._settings.title_max_chars),
                created_at=at,
                updated_at=at,
            )
            self._conversations.create(conversation)
            return self._loaded(reads, conversation, True, now)
        reads = self.authorised(user_id, project_id, conversation_id, Role.EDITOR)
        assert reads.conversation is not None
        return self._loaded(reads, reads.conversation, False, now)

    def for_preview(
        self, user_id: str, project_id: str, conversation_id: str, now: datetime
    ) -> LoadedTurn:
        reads = self.authorised(user_id, project_id, conversation_id, Role.VIEWER)
        assert reads.conversation is not None
        return self._loaded(reads, reads.conversation, False, now)

    def authorised(
        self, user_id: str, project_id: str, conversation_id: str | None, needed: Role
    ) -> TurnReads:
        """The batched read, once the caller's role is enough; with a conversation id, the
        caller's own live thread or a 404. An id no thread could have is a 404 too, but
        only after the role check, so a stranger still gets 403."""
        wellformed = conversation_id is None or is_id(conversation_id)
        reads = self._turns.read(user_id, project_id, conversation_id if wellformed else None)
        require(reads.role, needed)
        if reads.project is None:
            raise NotFound("No such project.")
        if conversation_id is not None and (not wellformed or reads.conversation is None):
            raise NotFound("No such conversation.")
        return reads

    def session_of(self, reads: TurnReads, conversation: Conversation) -> tuple[Session, bool]:
        """The thread's session, rebuilt from saved messages when it was pruned or never made."""
        if reads.session is not None:
            return reads.session, True
        if conversation.message_count == 0:
            return Session(cleared_after=conversation.cleared_after), False
        size = self._settings.window_messages
        recent = self._messages.latest_after(
            conversation.user_id,
            conversation.project_id,
            conversation.conversation_id,
            conversation.cleared_after,
            size * 3,
        )
        logger.info("session rebuilt", extra={"conversation_id": conversation.conversation_id})
        window = rebuilt(recent, conversation.cleared_after, size, self._settings.window_max_bytes)
        return Session(window=window, cleared_after=conversation.cleared_after), False

    def _loaded(
        self, reads: TurnReads, conversation: Conversation, created: bool, now: datetime
    ) -> LoadedTurn:
        assert reads.project is not None
        memory = self._memories.held(
            conversation.user_id,
            conversation.project_id,
            None if created else conversation.conversation_id,
            now,
        )
        session, exists = self.session_of(reads, conversation)
        context = turn_context(
            reads.project,
            render_memory_block(memory.persistent, memory.thread, now),
            conversation.summary,
            session.window,
        )
        return LoadedTurn(conversation, created, session, exists, context, memory)
