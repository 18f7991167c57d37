"""Durable memory: short key/value entries read into every prompt, and the block they are
rendered into.

Limits (values from ``Settings``): a key is 1 to 64 characters of ``[a-z0-9_.-]``; a value
is plain text of 1 to ``memory_value_max_chars`` (500) characters after whitespace and
control characters are folded into single spaces: long enough for a rule in a sentence
or two, short enough that 50 of them stay a small part of the prompt.

An entry with an ``expires_at`` in the past is gone as far as every reader is concerned,
whether or not a cleanup job has deleted it yet; ``is_active`` is that rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum
import re
from typing import Any, NamedTuple
import unicodedata

from pydantic import BaseModel, Field, field_validator, model_validator

from recall.domain.clock import parse, stamp
from recall.domain.tools import KEY_PATTERN
from recall.errors import Invalid


class Category(StrEnum):
    """The five kinds of entry, in the order the memory block lists them."""

    BRAND = "brand"
    PREFERENCES = "preferences"
    FORBIDDEN = "forbidden"
    CONTEXT = "context"
    HISTORY = "history"


class Scope(StrEnum):
    PERSISTENT = "persistent"
    THREAD = "thread"


class Source(StrEnum):
    """Who wrote an entry: background sources never replace an ``explicit`` one."""

    EXPLICIT = "explicit"
    EXTRACTED = "extracted"
    CONSOLIDATED = "consolidated"
    IMPORTED = "imported"


class Action(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    EXPIRED = "expired"
    KEPT = "kept"


BACKGROUND_SOURCES = frozenset({Source.EXTRACTED, Source.CONSOLIDATED, Source.IMPORTED})
PROJECT_BLOCK = "project_memory"
THREAD_BLOCK = "thread_memory"
_KEY = re.compile(KEY_PATTERN)
_ORDER = {category: position for position, category in enumerate(Category)}
_BREAKING = frozenset({"Cc", "Cs", "Zl", "Zp"})
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"})


class MemoryEntry(BaseModel):
    """One entry. ``created_at`` and ``updated_at`` are stamped by the store when written,
    except an imported entry's, which keep the times its document gave. ``said_at`` is
    set on an extracted entry only: when the user said it, which can be long before the
    extraction wrote it, and which consolidation weighs to tell the newer of two rules."""

    key: str = Field(pattern=KEY_PATTERN)
    value: str
    category: Category
    scope: Scope = Scope.PERSISTENT
    conversation_id: str | None = None
    source: Source = Source.EXPLICIT
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    created_at: str = ""
    updated_at: str = ""
    expires_at: str | None = None
    said_at: str | None = None

    @field_validator("expires_at", mode="before")
    @classmethod
    def _one_stamp_format(cls, value: Any) -> Any:
        """One text format, so the store can compare expiry times as strings."""
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError("expires_at needs a time zone")
            return stamp(value)
        if isinstance(value, str):
            return stamp(parse(value))
        return value

    @model_validator(mode="after")
    def _thread_entries_name_their_thread(self) -> MemoryEntry:
        if (self.scope == Scope.THREAD) != (self.conversation_id is not None):
            raise ValueError("a thread entry, and only a thread entry, has a conversation_id")
        return self


class HistoryRecord(BaseModel):
    """One change to an entry: what it was, what it became, and what changed it. An
    expiry has no source: the clock did it."""

    key: str
    scope: Scope
    conversation_id: str | None = None
    action: Action
    old_value: str | None = None
    new_value: str | None = None
    category: Category | None = None
    source: Source | None = None
    reason: str | None = None
    at: str


class MemoryMeta(BaseModel):
    """The per-user-and-project counters the background gates read."""

    persistent_count: int = 0
    last_extraction_at: str | None = None
    last_consolidation_at: str | None = None
    sessions_since_consolidation: int = 0
    consolidation_due_at: str | None = None


class MemoryLine(NamedTuple):
    """One ``key: value`` line of a rendered block, as a reader of the block sees it."""

    scope: Scope
    category: Category
    key: str
    value: str


def plain_text(text: str) -> str:
    """One line of text: line breaks, tabs and control characters become spaces, runs of
    spaces become one, and the ends are trimmed."""
    spaced = "".join(" " if unicodedata.category(char) in _BREAKING else char for char in text)
    return " ".join(spaced.split())


def shows_something(text: str) -> bool:
    """Whether ``text`` has a character a reader can see: one made only of spaces,
    controls, separators or format characters (zero-width, BOM…) is blank."""
    return any(unicodedata.category(char) not in _INVISIBLE for char in text)


def check_key(key: str) -> str:
    """A key of ``[a-z0-9_.-]``, not only dots: an HTTP client normalises ``.`` and ``..``
    out of a path, so such an entry could never be read or deleted by its URL."""
    if not _KEY.fullmatch(key) or not key.strip("."):
        raise Invalid(
            "A memory key is 1 to 64 characters: lowercase letters, digits, '_', '-' or '.', "
            "not only dots.",
            [{"field": "key", "message": "1 to 64 of a-z 0-9 _ - ., not only dots"}],
        )
    return key


def check_value(value: str, max_chars: int) -> str:
    """The value as it is stored: one line of plain text, 1 to ``max_chars`` characters,
    at least one of them visible."""
    cleaned = plain_text(value)
    if not shows_something(cleaned) or len(cleaned) > max_chars:
        raise Invalid(
            f"A memory value is plain text of 1 to {max_chars} characters, at least one of "
            "them visible.",
            [{"field": "value", "message": f"1 to {max_chars} characters"}],
        )
    return cleaned


def parse_category(text: str) -> Category:
    allowed = ", ".join(Category)
    try:
        return Category(text)
    except ValueError as exc:
        raise Invalid(
            f"category must be one of: {allowed}.",
            [{"field": "category", "message": f"one of: {allowed}", "allowed": list(Category)}],
        ) from exc


def parse_scope(text: str) -> Scope:
    allowed = ", ".join(Scope)
    try:
        return Scope(text)
    except ValueError as exc:
        raise Invalid(
            f"scope must be one of: {allowed}.",
            [{"field": "scope", "message": f"one of: {allowed}", "allowed": list(Scope)}],
        ) from exc


def is_active(entry: MemoryEntry, now: datetime) -> bool:
    """False once the entry's expiry has passed, deleted or not."""
    return entry.expires_at is None or parse(entry.expires_at) > now


def expiry_too_far(expires_at: datetime, now: datetime, max_days: int) -> str | None:
    """Why an expiry is refused for lying more than ``max_days`` ahead (MEMORY_EXPIRY_MAX_DAYS),
    or None: a write and an import hold it alike."""
    if expires_at - now > timedelta(days=max_days):
        return f"at most {max_days} days ahead"
    return None


def sort_for_listing(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """Category in the block's fixed order, then key."""
    return sorted(entries, key=lambda entry: (_ORDER[entry.category], entry.key))


def neutralise(value: str) -> str:
    """A value that cannot close or forge a block, start a ``[section]`` or add a line."""
    text = plain_text(value).replace("<", "‹").replace(">", "›")
    return "［" + text[1:] if text.startswith("[") else text


def _block(tag: str, entries: list[MemoryEntry]) -> list[str]:
    lines = [f"<{tag}>"]
    category: Category | None = None
    for entry in entries:
        if entry.category != category:
            category = entry.category
            lines.append(f"[{category}]")
        lines.append(f"{entry.key}: {neutralise(entry.value)}")
    lines.append(f"</{tag}>")
    return lines


def render_memory_block(
    persistent: list[MemoryEntry], thread: list[MemoryEntry], now: datetime
) -> str:
    """The memory block of a prompt: ``<project_memory>`` then ``<thread_memory>``, each
    grouped by category in the fixed order; only active entries; "" when there are none."""
    lines: list[str] = []
    for tag, entries in ((PROJECT_BLOCK, persistent), (THREAD_BLOCK, thread)):
        active = sort_for_listing(entry for entry in entries if is_active(entry, now))
        if active:
            lines.extend(_block(tag, active))
    return "\n".join(lines)


_SCOPE_OF_TAG = {PROJECT_BLOCK: Scope.PERSISTENT, THREAD_BLOCK: Scope.THREAD}
_OPENING = re.compile(r"^<(project_memory|thread_memory)>$")
_SECTION = re.compile(r"^\[([a-z]+)\]$")
_LINE = re.compile(r"^([a-z0-9_.-]{1,64}): ?(.*)$")


def parse_memory_block(text: str) -> list[MemoryLine]:
    """The entries of rendered memory blocks, in order: the inverse of
    ``render_memory_block``. Lines outside a block, or that fit no shape, are skipped."""
    found: list[MemoryLine] = []
    tag: str | None = None
    category: Category | None = None
    for line in text.split("\n"):
        if tag is None:
            if opening := _OPENING.match(line):
                tag, category = opening.group(1), None
        elif line == f"</{tag}>":
            tag = None
        elif (section := _SECTION.match(line)) and section.group(1) in _ORDER:
            category = Category(section.group(1))
        elif (entry := _LINE.match(line)) and category is not None:
            found.append(MemoryLine(_SCOPE_OF_TAG[tag], category, entry.group(1), entry.group(2)))
    return found
