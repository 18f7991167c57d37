"""The background gates and schedule on a user's META item: claims that exactly one worker
wins, with the numbers from the settings, and a session that schedules consolidation."""

from __future__ import annotations

from datetime import datetime, timedelta
import uuid

import pytest

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import Category, MemoryEntry
from recall.settings import get_settings
from recall.store.memories import MemoryStore
from recall.store.memory_upkeep import MemoryUpkeep

NOW = datetime.fromisoformat("2025-03-01T12:00:00+00:00")


class Caller:
    def __init__(self) -> None:
        self.user = f"user-{uuid.uuid4().hex[:12]}"
        self.project = new_id()


@pytest.fixture
def me() -> Caller:
    return Caller()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(get_settings())


@pytest.fixture
def upkeep() -> MemoryUpkeep:
    return MemoryUpkeep(get_settings())


def entry(key: str) -> MemoryEntry:
    return MemoryEntry(key=key, value=f"{key} value", category=Category.PREFERENCES)


def start_sessions(upkeep: MemoryUpkeep, me: Caller, count: int) -> None:
    """Sessions start as a chat turn's transaction starts them."""
    for _ in range(count):
        upkeep.client.update_item(
            **upkeep.session_started_request(me.user, me.project, clock.stamp(NOW))
        )


def test_only_one_worker_claims_extraction_within_the_cooldown(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given two workers that run at the same moment, with the seeds' cooldown of 4 hours
    cooldown = timedelta(seconds=get_settings().extract_cooldown_seconds)
    assert cooldown == timedelta(hours=4)
    other = MemoryUpkeep(get_settings())
    # When / Then: the first claims, the second is refused by the condition
    assert upkeep.claim_extraction(me.user, me.project, NOW) is True
    assert other.claim_extraction(me.user, me.project, NOW) is False
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(hours=3)) is False
    assert upkeep.claim_extraction(me.user, me.project, NOW + cooldown) is True
    assert store.meta(me.user, me.project).last_extraction_at == clock.stamp(NOW + cooldown)


def test_consolidation_is_claimed_only_when_all_three_gates_pass(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    settings = get_settings()
    gap = timedelta(seconds=settings.consolidate_min_seconds)
    assert gap == timedelta(hours=24)

    def claim(at: datetime) -> bool:
        return upkeep.claim_consolidation(me.user, me.project, at)

    # Given too few sessions and memories
    assert claim(NOW) is False
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    assert claim(NOW) is False
    for index in range(settings.consolidate_min_memories):
        store.write(me.user, me.project, entry(f"m{index}"), NOW)
    # When / Then: all three pass, once; the session count restarts
    assert claim(NOW) is True
    meta = store.meta(me.user, me.project)
    assert meta.sessions_since_consolidation == 0
    assert meta.last_consolidation_at == clock.stamp(NOW)
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    assert claim(NOW + gap - timedelta(minutes=1)) is False
    assert claim(NOW + gap) is True


def test_the_gates_are_the_numbers_the_store_was_given(store: MemoryStore, me: Caller) -> None:
    # Given a store whose settings say: extract every minute; consolidate after two
    # minutes, one session and one memory
    upkeep = MemoryUpkeep(
        get_settings().model_copy(
            update={
                "extract_cooldown_seconds": 60,
                "consolidate_min_seconds": 120,
                "consolidate_min_sessions": 1,
                "consolidate_min_memories": 1,
            }
        )
    )
    # When / Then: extraction follows its one-minute cooldown
    assert upkeep.claim_extraction(me.user, me.project, NOW) is True
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(seconds=59)) is False
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(seconds=60)) is True
    # When / Then: consolidation needs one session and one memory, then two minutes
    store.write(me.user, me.project, entry("tone"), NOW)
    assert upkeep.claim_consolidation(me.user, me.project, NOW) is False
    start_sessions(upkeep, me, 1)
    assert upkeep.claim_consolidation(me.user, me.project, NOW) is True
    start_sessions(upkeep, me, 1)
    assert upkeep.claim_consolidation(me.user, me.project, NOW + timedelta(seconds=119)) is False
    assert upkeep.claim_consolidation(me.user, me.project, NOW + timedelta(seconds=120)) is True
