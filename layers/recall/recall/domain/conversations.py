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
    # The window's first message: later turns read the window from here (and past
    # ``cleared_after``), so it never has to be written whole.
    window_start: str | None = None
    # The newest message a turn saved: the window read beside this item must reach it,
    # and a turn saves only over the one it read (two turns racing land in order).
    last_message_id: str | None = None
    # When a user message carrying preference signals was saved that no extraction has
    # read since: the thread is due one once it is long enough, whichever message said it.
    signals_at: str | None = None
    # An extraction the cooldown refused set when the slot is free again: until then a turn
    # with no signals of its own queues none for the stamp (each would be refused too).
    signals_wait_until: str | None = None


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
