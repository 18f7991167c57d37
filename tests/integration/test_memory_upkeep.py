"""The background gates and schedule on a user's META item: claims that exactly one worker
wins, with the numbers from the settings, and a session that schedules consolidation."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
import uuid

from botocore.exceptions import ClientError
import pytest

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import Category, MemoryEntry, Source
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


def claim_consolidation(upkeep: MemoryUpkeep, store: MemoryStore, me: Caller, at: datetime) -> bool:
    """Claim as the consolidation job does: with the persistent entries it read at ``at``."""
    held = store.held(me.user, me.project, None, at)
    active = len(held.persistent)
    slot = upkeep.claim_consolidation(
        me.user, me.project, at, active=active, expired=len(held.items) - active
    )
    return slot is not None


def test_only_one_worker_claims_extraction_within_the_cooldown(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given two workers that run at the same moment, with the seeds' cooldown of 4 hours
    cooldown = timedelta(seconds=get_settings().extract_cooldown_seconds)
    assert cooldown == timedelta(hours=4)
    other = MemoryUpkeep(get_settings())
    # When / Then: the first claims, the second is refused by the condition
    assert upkeep.claim_extraction(me.user, me.project, NOW) is not None
    assert other.claim_extraction(me.user, me.project, NOW) is None
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(hours=3)) is None
    assert upkeep.claim_extraction(me.user, me.project, NOW + cooldown) is not None
    assert store.meta(me.user, me.project).last_extraction_at == clock.stamp(NOW + cooldown)


def test_consolidation_is_claimed_only_when_all_three_gates_pass(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    settings = get_settings()
    gap = timedelta(seconds=settings.consolidate_min_seconds)
    assert gap == timedelta(hours=24)

    def claim(at: datetime) -> bool:
        return claim_consolidation(upkeep, store, me, at)

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
    assert upkeep.claim_extraction(me.user, me.project, NOW) is not None
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(seconds=59)) is None
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(seconds=60)) is not None
    # When / Then: consolidation needs one session and one memory, then two minutes
    store.write(me.user, me.project, entry("tone"), NOW)
    assert claim_consolidation(upkeep, store, me, NOW) is False
    start_sessions(upkeep, me, 1)
    assert claim_consolidation(upkeep, store, me, NOW) is True
    start_sessions(upkeep, me, 1)
    assert claim_consolidation(upkeep, store, me, NOW + timedelta(seconds=119)) is False
    assert claim_consolidation(upkeep, store, me, NOW + timedelta(seconds=120)) is True


def test_expired_entries_the_expire_job_has_not_deleted_do_not_count_for_consolidation(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given four entries and three more that expired an hour ago, still stored
    settings = get_settings()
    expires = clock.stamp(NOW - timedelta(hours=1))
    for index in range(settings.consolidate_min_memories - 1):
        store.write(me.user, me.project, entry(f"m{index}"), NOW - timedelta(hours=2))
    for index in range(3):
        gone = entry(f"sale{index}").model_copy(update={"expires_at": expires})
        store.write(me.user, me.project, gone, NOW - timedelta(hours=2))
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    assert store.meta(me.user, me.project).persistent_count == 7
    # When / Then: the slot is refused and the gates are as they were
    assert claim_consolidation(upkeep, store, me, NOW) is False
    meta = store.meta(me.user, me.project)
    assert meta.last_consolidation_at is None
    assert meta.sessions_since_consolidation == settings.consolidate_min_sessions
    # And a fifth active entry opens it
    store.write(me.user, me.project, entry("m_last"), NOW)
    assert claim_consolidation(upkeep, store, me, NOW) is True


def test_an_entry_deleted_after_the_read_counts_against_the_consolidation_gate(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given five entries and one expired, read by a worker, then one entry deleted
    settings = get_settings()
    expires = clock.stamp(NOW - timedelta(hours=1))
    for index in range(settings.consolidate_min_memories):
        store.write(me.user, me.project, entry(f"m{index}"), NOW - timedelta(hours=2))
    gone = entry("sale").model_copy(update={"expires_at": expires})
    store.write(me.user, me.project, gone, NOW - timedelta(hours=2))
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    read = store.held(me.user, me.project, None, NOW)
    store.delete(me.user, me.project, "m0", None, Source.EXPLICIT, NOW)
    # When the worker claims with what it read
    claimed = upkeep.claim_consolidation(
        me.user, me.project, NOW, active=len(read.persistent), expired=1
    )
    # Then four active entries are one too few, though the counter says five
    assert claimed is None
    assert store.meta(me.user, me.project).persistent_count == 5


def test_an_extraction_slot_given_back_puts_back_the_stamp_it_replaced(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given an extraction four hours ago, and a run that takes the slot now and fails
    cooldown = timedelta(seconds=get_settings().extract_cooldown_seconds)
    assert upkeep.claim_extraction(me.user, me.project, NOW - cooldown) is not None
    slot = upkeep.claim_extraction(me.user, me.project, NOW)
    assert slot is not None
    # When it gives the slot back
    assert upkeep.give_back_extraction(me.user, me.project, slot) is True
    # Then the last extraction is the one before, and the slot is free
    assert store.meta(me.user, me.project).last_extraction_at == clock.stamp(NOW - cooldown)
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(minutes=1)) is not None


def test_an_extraction_slot_is_never_given_back_over_a_later_claim(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given a run that took the slot and still runs when the cooldown is over, and a
    # second worker that took the slot then
    cooldown = timedelta(seconds=get_settings().extract_cooldown_seconds)
    slot = upkeep.claim_extraction(me.user, me.project, NOW)
    assert slot is not None
    assert upkeep.claim_extraction(me.user, me.project, NOW + cooldown) is not None
    # When the first run fails and gives its slot back
    given = upkeep.give_back_extraction(me.user, me.project, slot)
    # Then the second worker's claim stands
    assert given is False
    assert store.meta(me.user, me.project).last_extraction_at == clock.stamp(NOW + cooldown)


def test_a_consolidation_slot_given_back_keeps_the_sessions_that_started_meanwhile(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given a consolidation a day ago, then three sessions
    settings = get_settings()
    day = timedelta(seconds=settings.consolidate_min_seconds)
    for index in range(settings.consolidate_min_memories):
        store.write(me.user, me.project, entry(f"m{index}"), NOW - 2 * day)
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    assert claim_consolidation(upkeep, store, me, NOW - day) is True
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    # When a run takes the slot, a session starts while it runs, and the run fails
    slot = upkeep.claim_consolidation(me.user, me.project, NOW, active=5, expired=0)
    assert slot is not None
    later = clock.stamp(NOW + timedelta(minutes=1))
    upkeep.client.update_item(**upkeep.session_started_request(me.user, me.project, later))
    assert upkeep.give_back_consolidation(me.user, me.project, slot) is True
    # Then the last consolidation is the one a day ago, the sessions are the three the run
    # found and the one since, and the user is due from that session on
    meta = store.meta(me.user, me.project)
    assert meta.last_consolidation_at == clock.stamp(NOW - day)
    assert meta.sessions_since_consolidation == settings.consolidate_min_sessions + 1
    assert meta.consolidation_due_at == later
    # And the slot is there to take again
    assert claim_consolidation(upkeep, store, me, NOW + timedelta(minutes=2)) is True


def test_a_consolidation_slot_is_never_given_back_over_a_later_claim(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller
) -> None:
    # Given a run that took the slot and still runs a day later, when a second worker
    # took the slot after three more sessions
    settings = get_settings()
    day = timedelta(seconds=settings.consolidate_min_seconds)
    for index in range(settings.consolidate_min_memories):
        store.write(me.user, me.project, entry(f"m{index}"), NOW)
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    slot = upkeep.claim_consolidation(me.user, me.project, NOW, active=5, expired=0)
    assert slot is not None
    start_sessions(upkeep, me, settings.consolidate_min_sessions)
    assert claim_consolidation(upkeep, store, me, NOW + day) is True
    # When the first run fails and gives its slot back
    given = upkeep.give_back_consolidation(me.user, me.project, slot)
    # Then the second worker's claim stands: its stamp, no sessions, not scheduled
    assert given is False
    meta = store.meta(me.user, me.project)
    assert meta.last_consolidation_at == clock.stamp(NOW + day)
    assert (meta.sessions_since_consolidation, meta.consolidation_due_at) == (0, None)


def test_a_give_back_that_met_another_transaction_is_sent_again(
    store: MemoryStore, upkeep: MemoryUpkeep, me: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run that took the slot and failed, and its give-back meeting a turn's
    # transaction on META once
    slot = upkeep.claim_extraction(me.user, me.project, NOW)
    assert slot is not None
    client = upkeep.client
    update = client.update_item
    met: list[bool] = []

    def meets_a_transaction_once(**request: Any) -> Any:
        if not met:
            met.append(True)
            raise ClientError(
                {"Error": {"Code": "TransactionConflictException", "Message": "ongoing"}},
                "UpdateItem",
            )
        return update(**request)

    monkeypatch.setattr(client, "update_item", meets_a_transaction_once)
    monkeypatch.setattr(type(upkeep), "client", property(lambda _: client))
    # When it gives the slot back
    given = upkeep.give_back_extraction(me.user, me.project, slot)
    # Then it was sent again and landed: the redelivery finds the slot free
    assert (met, given) == ([True], True)
    assert upkeep.claim_extraction(me.user, me.project, NOW + timedelta(minutes=1)) is not None
