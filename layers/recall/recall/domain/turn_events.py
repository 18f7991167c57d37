"""What a chat turn tells someone watching it while it runs (the WebSocket stream): the
thread it landed on, the reply text as the model writes it and each memory tool call.
The HTTP turn has no one watching; a watcher never changes what the turn saves."""

from __future__ import annotations

from typing import Literal, Protocol

from recall.domain.conversations import Conversation

ToolOutcome = Literal["saved", "forgotten", "refused"]


class TurnListener(Protocol):
    def started(self, conversation: Conversation, created: bool) -> None:
        """The thread is known (found, or made for this turn); the model is not asked yet."""

    def text(self, chunk: str) -> None:
        """Reply text as the model wrote it, in order."""

    def tool(self, name: str, key: str | None, outcome: ToolOutcome) -> None:
        """A memory tool call ran: ``saved``, ``forgotten``, or ``refused`` (a bad call)."""
