"""ExtractionService writes by its own settings: EXTRACT_MIN_CONFIDENCE and
EXTRACT_MAX_NEW as it was given them, not the seeds' numbers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from recall.domain import clock
from recall.domain.jobs import ExtractJob
from recall.domain.memory import Category, MemoryEntry, Source
from recall.domain.messages import Message
from recall.domain.usage import Counts
from recall.services.extraction import ExtractionReport, ExtractionService
from recall.settings import Settings
from recall.store.memory_upkeep import ExtractionSlot
from tests.unit.services.in_memory import (
    InMemoryConversations,
    InMemoryMemories,
    InMemoryMessages,
    messages_of,
)

USER, PROJECT = "alice", "shop"
# Nine rules about nine different things: none duplicates or contradicts another.
NINE_RULES = {
    "shipping_day": "Ship orders on Fridays",
    "return_window": "Returns are accepted for thirty days",
    "gift_wrap": "Offer gift wrapping at checkout",
    "logo_placement": "Put the logo in the top left corner",
    "newsletter_day": "Send the newsletter on Tuesdays",
    "voice": "Write like a friendly neighbour",
    "product_photos": "Show products on a plain backdrop",
    "checkout_button": "Label the checkout button Buy now",
    "footer_links": "Link the care guide from the footer",
}


class Proposes:
    """An extractor that proposes the same candidates whatever the thread says."""

    def __init__(self, candidates: list[MemoryEntry]) -> None:
        self._candidates = candidates

    def propose(
        self, messages: list[Message], spent: Callable[[Counts], None] | None = None
    ) -> list[MemoryEntry]:
        return list(self._candidates)


class SlotFree:
    """MemoryUpkeep's extraction slot, never taken before: every claim is granted."""

    def claim_extraction(
        self, user_id: str, project_id: str, now: datetime, guard: object = None
    ) -> ExtractionSlot:
        return ExtractionSlot(clock.stamp(now), None)

    def give_back_extraction(self, user_id: str, project_id: str, slot: ExtractionSlot) -> bool:
        return True


def candidate(key: str, value: str, confidence: float) -> MemoryEntry:
    return MemoryEntry(
        key=key,
        value=value,
        category=Category.PREFERENCES,
        source=Source.EXTRACTED,
        confidence=confidence,
    )


def extract(settings: Settings, candidates: list[MemoryEntry]) -> tuple[ExtractionReport, set[str]]:
    """One extraction of a thread long enough to extract from, with ``settings``; the
    report and the keys then stored."""
    conversations, messages = InMemoryConversations(), InMemoryMessages()
    memories = InMemoryMemories(settings)
    spoken = messages_of(["user", "assistant"] * settings.extract_min_messages)
    thread = conversations.add(USER, PROJECT, message_count=len(spoken))
    messages.add(USER, PROJECT, thread.conversation_id, spoken)
    service = ExtractionService(
        settings,
        conversations,  # type: ignore[arg-type]
        messages,  # type: ignore[arg-type]
        memories,  # type: ignore[arg-type]
        SlotFree(),  # type: ignore[arg-type]
        Proposes(candidates),
    )
    job = ExtractJob(user_id=USER, project_id=PROJECT, conversation_id=thread.conversation_id)
    report = service.run(job, clock.now())
    return report, {entry.key for entry in memories.entries(USER, PROJECT)}


@pytest.mark.parametrize(
    ("minimum", "stored"),
    [(0.6, {"gift_wrap"}), (0.59, {"gift_wrap", "shipping_day"}), (0.95, set())],
    ids=["the seeds' 0.6", "0.59", "0.95"],
)
def test_extraction_writes_no_candidate_below_its_settings_minimum_confidence(
    minimum: float, stored: set[str]
) -> None:
    # Given EXTRACT_MIN_CONFIDENCE, and one candidate at 0.59 and another at 0.9
    settings = Settings(extract_min_confidence=minimum)
    candidates = [
        candidate("shipping_day", NINE_RULES["shipping_day"], 0.59),
        candidate("gift_wrap", NINE_RULES["gift_wrap"], 0.9),
    ]
    # When
    report, keys = extract(settings, candidates)
    # Then only those at or above the minimum are written
    assert report.ran is True
    assert (keys, report.written) == (stored, len(stored))


@pytest.mark.parametrize("most", [8, 3], ids=["the seeds' 8", "3"])
def test_extraction_writes_at_most_its_settings_number_of_new_entries(most: int) -> None:
    # Given EXTRACT_MAX_NEW, and nine distinct candidates at 0.9
    settings = Settings(extract_max_new=most)
    candidates = [candidate(key, value, 0.9) for key, value in NINE_RULES.items()]
    # When
    report, keys = extract(settings, candidates)
    # Then that many are written, and the rest wait for a later extraction
    assert report.ran is True
    assert report.written == len(keys) == most
    assert keys < set(NINE_RULES)
