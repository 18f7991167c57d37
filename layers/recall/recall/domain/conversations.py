"""Conversations (saved threads) and the rules that shape their lists."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
import re

from pydantic import BaseModel

from recall.domain.clock import parse
from recall.domain.presets import PresetCopy, ThreadSettings


class Period(StrEnum):
    TODAY = "today"
    YESTERDAY = "yesterday"
    PREVIOUS_7_DAYS = "previous7Days"
    PREVIOUS_30_DAYS = "previous30Days"
    OLDER = "older"


class Conversation(BaseModel):
    user_id: str
    project_id: str
    conversation_id: str
    title: str
    model: str | None = None
    archived: bool = False
    message_count: int = 0
    turn_count: int = 0
    cleared_after: str | None = None
    summary: str = ""
    summary_through: str | None = None
    created_at: str
    updated_at: str
    # The preset the thread started from, as it was then, and the thread's own overrides
    # (None: it follows the project's defaults and its preset).
    preset: PresetCopy | None = None
    settings: ThreadSettings | None = None
    # Moved by turns saved before the member's usage item became the turn's lock; kept so
    # those items still read.
    version: int = 0
    # The window's first message: later turns read the window from here (and past
    # ``cleared_after``), so it never has to be written whole.
    window_start: str | None = None
    # The newest message a turn saved: the window read beside this item must reach it.
    last_message_id: str | None = None
    # When the last turn was saved: a session starts after SESSION_IDLE_SECONDS without
    # one. Not ``updated_at``, which a rename or an archive moves too.
    last_turn_at: str | None = None
    # When a user message carrying preference signals was saved that no extraction has
    # read since: the thread is due one once it is long enough, whichever message said it.
    signals_at: str | None = None
    # An extraction the cooldown refused set when the slot is free again: until then a turn
    # with no signals of its own queues none for the stamp (each would be refused too).
    signals_wait_until: str | None = None


class ActiveThread(BaseModel):
    """What each turn moves on the thread its member last talked in, kept on the member's
    usage item for the month (which the turn writes anyway) instead of on the thread's
    item: so a turn in the same thread as the last writes its messages and one item. The
    thread's item gets these when the member turns to another thread; until then every
    reader lays them over it (``Conversation.with_active``)."""

    conversation_id: str
    message_count: int
    turn_count: int
    last_message_id: str
    window_start: str | None = None
    at: str
    model: str | None = None


# The thread's fields its turns move (``with_active`` lays them over); nothing else writes
# them.
TURN_MOVED = (
    "message_count",
    "turn_count",
    "last_message_id",
    "window_start",
    "last_turn_at",
    "model",
)


def with_active(conversation: Conversation, active: ActiveThread | None) -> Conversation:
    """The thread as its last turns left it: the active state wins for its own thread, and
    ``updated_at`` is the later of a turn's and a rename's or archive's."""
    if active is None or active.conversation_id != conversation.conversation_id:
        return conversation
    return conversation.model_copy(
        update={
            "message_count": active.message_count,
            "turn_count": active.turn_count,
            "last_message_id": active.last_message_id,
            "window_start": active.window_start,
            "last_turn_at": active.at,
            "updated_at": max(conversation.updated_at, active.at),
            "model": active.model or conversation.model,
        }
    )


DEFAULT_TITLE = "New conversation"


def period_of(updated_at: str, now: datetime) -> Period:
    """The panel's grouping label, by calendar day in UTC."""
    days = (now.date() - parse(updated_at).date()).days
    if days <= 0:
        return Period.TODAY
    if days == 1:
        return Period.YESTERDAY
    if days <= 7:
        return Period.PREVIOUS_7_DAYS
    if days <= 30:
        return Period.PREVIOUS_30_DAYS
    return Period.OLDER


def title_from_message(text: str, max_chars: int) -> str:
    """A thread's title from its first message: one line, trimmed at a word boundary."""
    line = re.sub(r"\s+", " ", text).strip()
    if not line:
        return DEFAULT_TITLE
    if len(line) <= max_chars:
        return line
    cut = line[: max_chars - 1]
    if " " in cut[max_chars // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,.;:-") + "…"
