"""A thread's context outside a turn: the clear-context marker, and the preview of exactly
what the next turn would send."""

from __future__ import annotations

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.context import TurnContext, assemble, token_estimate
from recall.domain.ids import new_id
from recall.domain.presets import EffectiveSettings
from recall.domain.prompt import ModelRequest
from recall.services.turn_context import TurnContextLoader
from recall.settings import Settings
from recall.store.conversations import ConversationStore


class ContextService:
    def __init__(
        self,
        settings: Settings,
        loader: TurnContextLoader,
        conversations: ConversationStore,
    ) -> None:
        self._settings = settings
        self._loader = loader
        self._conversations = conversations

    def clear(self, user_id: str, project_id: str, conversation_id: str) -> str:
        """Later turns start their window after this point; history and memory stay. One
        write on the thread; a turn racing it lands after the marker (``mark_cleared``)."""
        self._loader.authorised(user_id, project_id, conversation_id, Role.EDITOR)
        marker = new_id()
        self._conversations.mark_cleared(user_id, project_id, conversation_id, marker)
        return marker

    def preview(
        self, user_id: str, project_id: str, conversation_id: str
    ) -> tuple[TurnContext, ModelRequest, int, EffectiveSettings]:
        """Exactly what the next turn would send, with the new message left out, and the
        settings the thread runs with."""
        loaded = self._loader.for_preview(user_id, project_id, conversation_id, clock.now())
        thread = loaded.settings
        request = assemble(loaded.context, "", thread.model, thread.max_tokens, thread.temperature)
        request = request.model_copy(update={"messages": request.messages[:-1]})
        return loaded.context, request, token_estimate(request), thread
