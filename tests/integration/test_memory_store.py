"""The memory store and service over the embedded DynamoDB: the rules the HTTP API cannot
reach (background writes, the counters the gates read, expiry bookkeeping), with the
clock passed in so no test sleeps."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
import uuid

import pytest

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import Action, Category, MemoryEntry, Scope, Source
from recall.errors import Conflict
from recall.services.access import ProjectAccess
from recall.services.memories import MemoryService
from recall.settings import get_settings
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import from_item, to_item
from recall.store.keys import owner_key as owner_of
from recall.store.memories import BY_DUE, MemoryStore, entry_sk
from recall.store.projects import ProjectStore

NOW = datetime.fromisoformat("2025-03-01T12:00:00+00:00")
THREAD = "01JTHREADAAAAAAAAAAAAAAAAA"


class Caller:
    """A fresh user and project, so every test owns its partition."""

    def __init__(self) -> None:
        self.user = f"user-{uuid.uuid4().hex[:12]}"
        self.project = new_id()


@pytest.fixture
def me() -> Caller:
    return Caller()


@pytest.fixture
def store_with() -> Callable[..., MemoryStore]:
    def make(**limits: Any) -> MemoryStore:
        return MemoryStore(get_settings().model_copy(update=limits))

    return make


@pytest.fixture
def store(store_with: Callable[..., MemoryStore]) -> MemoryStore:
    return store_with()


def service_over(store: MemoryStore) -> MemoryService:
    settings = get_settings()
    return MemoryService(
        settings, ProjectAccess(ProjectStore(settings)), ConversationStore(settings), store
    )


def entry(key: str, value: str = "v", **fields: Any) -> MemoryEntry:
    return MemoryEntry.model_validate(
        {"key": key, "value": value, "category": Category.CONTEXT, **fields}
    )


def extracted(key: str, value: str = "v", **fields: Any) -> MemoryEntry:
    return entry(key, value, source=Source.EXTRACTED, confidence=0.8, **fields)


def raw_item(store: MemoryStore, me: Caller, key: str, thread: str | None = None) -> Any:
    found = store.client.get_item(
        TableName=store.table,
        Key=to_item({"owner": owner_of(me.user, me.project), "sk": entry_sk(key, thread)}),
    ).get("Item")
    return from_item(found) if found else None


def history(store: MemoryStore, me: Caller, key: str) -> list[tuple[str, Any, Any, Any]]:
    return [
        (r.action.value, r.old_value, r.new_value, r.source.value if r.source else None)
        for r in store.history(me.user, me.project, key, None)
    ]


# Precedence


def test_background_extraction_never_overwrites_an_explicit_entry(
    store: MemoryStore, me: Caller
) -> None:
    # Given an explicit entry
    store.write(me.user, me.project, entry("tone", "warm"), NOW)
    # When extraction later finds another value for the same key
    written = service_over(store).write_background(
        me.user, me.project, [extracted("tone", "corporate"), extracted("palette", "navy")]
    )
    # Then only the new key is written; the explicit entry and its history are untouched
    assert [e.key for e in written] == ["palette"]
    kept = store.get(me.user, me.project, "tone", None, NOW)
    assert kept is not None and kept.value == "warm" and kept.source == Source.EXPLICIT
    assert history(store, me, "tone") == [("created", None, "warm", "explicit")]


def test_consolidation_never_overwrites_or_deletes_an_explicit_entry(
    store: MemoryStore, me: Caller
) -> None:
    store.write(me.user, me.project, entry("tone", "warm"), NOW)
    merged = entry("tone", "merged", source=Source.CONSOLIDATED)
    assert store.write(me.user, me.project, merged, NOW) is None
    removed = store.delete(me.user, me.project, "tone", None, Source.CONSOLIDATED, NOW)
    assert removed is None
    kept = store.get(me.user, me.project, "tone", None, NOW)
    assert kept is not None and kept.value == "warm"


def test_the_explicit_rule_is_a_condition_on_the_write_not_a_read(
    store: MemoryStore, me: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an explicit entry, and a background writer that believes it may write anyway
    store.write(me.user, me.project, entry("tone", "warm"), NOW)
    monkeypatch.setattr(store, "_explicit_holds", lambda *args: False)
    sent: list[Any] = []
    real = store.client.transact_write_items

    def spy(**request: Any) -> Any:
        sent.append(request)
        return real(**request)

    monkeypatch.setattr(store.client, "transact_write_items", spy)
    # When
    with pytest.raises(Conflict):
        store.write(me.user, me.project, extracted("tone", "corporate"), NOW)
    # Then every attempt was refused by DynamoDB, and the entry is untouched
    assert sent and all(
        "#source <> :explicit" in r["TransactItems"][0]["Put"]["ConditionExpression"] for r in sent
    )
    kept = store.get(me.user, me.project, "tone", None, NOW)
    assert kept is not None and kept.value == "warm"


def test_a_background_write_updates_a_background_entry_and_the_newest_value_wins(
    store: MemoryStore, me: Caller
) -> None:
    first = store.write(me.user, me.project, extracted("palette", "navy"), NOW)
    later = NOW + timedelta(hours=1)
    second = store.write(me.user, me.project, extracted("palette", "teal"), later)
    assert first is not None and first[1] is True
    assert second is not None and second[1] is False
    assert second[0].value == "teal" and second[0].created_at == first[0].created_at
    assert second[0].updated_at == clock.stamp(later)


def test_an_explicit_write_replaces_a_background_entry(store: MemoryStore, me: Caller) -> None:
    store.write(me.user, me.project, extracted("palette", "navy"), NOW)
    saved = service_over(store).save_explicit(
        me.user, me.project, THREAD, "palette", "teal", "preferences", "persistent"
    )
    assert saved.source == Source.EXPLICIT and saved.category == Category.PREFERENCES
    assert history(store, me, "palette") == [
        ("created", None, "navy", "extracted"),
        ("updated", "navy", "teal", "explicit"),
    ]


def test_a_background_write_may_take_the_key_of_an_expired_explicit_entry(
    store: MemoryStore, me: Caller
) -> None:
    # Given an explicit entry that has expired, not yet cleaned up
    store.write(
        me.user, me.project, entry("sale", "on", expires_at=NOW + timedelta(minutes=1)), NOW
    )
    later = NOW + timedelta(hours=1)
    # When
    written = store.write(me.user, me.project, extracted("sale", "off"), later)
    # Then it is a new entry: a fresh createdAt, the expiry recorded before the creation
    assert written is not None and written[1] is False
    assert written[0].created_at == clock.stamp(later)
    assert history(store, me, "sale") == [
        ("created", None, "on", "explicit"),
        ("expired", "on", None, None),
        ("created", None, "off", "extracted"),
    ]


# The cap


def test_an_explicit_write_over_the_cap_is_a_conflict_unless_it_replaces(
    store_with: Callable[..., MemoryStore], me: Caller
) -> None:
    store = store_with(memory_cap=2)
    store.write(me.user, me.project, entry("a"), NOW)
    store.write(me.user, me.project, entry("b"), NOW)
    with pytest.raises(Conflict, match="already holds 2 persistent entries"):
        store.write(me.user, me.project, entry("c"), NOW)
    assert store.write(me.user, me.project, entry("b", "new"), NOW) is not None
    assert store.meta(me.user, me.project).persistent_count == 2


def test_background_writes_beyond_the_cap_are_dropped_and_logged(
    store_with: Callable[..., MemoryStore], me: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a cap of 3 with one explicit entry
    store = store_with(memory_cap=3)
    store.write(me.user, me.project, entry("kept"), NOW)
    # When extraction brings four new entries
    written = service_over(store).write_background(
        me.user, me.project, [extracted(f"found_{i}") for i in range(4)]
    )
    # Then two fit, two are dropped, and the log says why
    assert [e.key for e in written] == ["found_0", "found_1"]
    persistent, _ = store.active(me.user, me.project, None, NOW)
    assert len(persistent) == 3
    dropped = [
        r for r in caplog.records if r.getMessage().startswith("background memory write dropped")
    ]
    assert [getattr(r, "key", None) for r in dropped] == ["found_2", "found_3"]


def test_the_cap_is_checked_in_the_write_itself_so_a_racing_create_cannot_pass_it(
    store_with: Callable[..., MemoryStore], me: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a cap of 2 with one entry, and a writer whose read is overtaken by another
    # writer taking the last slot
    store, rival = store_with(memory_cap=2), store_with(memory_cap=2)
    store.write(me.user, me.project, entry("a"), NOW)
    real_read = store._current

    def overtaken(owner: str, sk: str) -> Any:
        seen = real_read(owner, sk)
        if sk == entry_sk("late", None):
            rival.write(me.user, me.project, entry("rival"), NOW)
        return seen

    monkeypatch.setattr(store, "_current", overtaken)
    # When
    with pytest.raises(Conflict, match="already holds 2"):
        store.write(me.user, me.project, entry("late"), NOW)
    # Then the counter refused it in the same transaction, and the store holds two
    persistent, _ = store.active(me.user, me.project, None, NOW)
    assert len(persistent) == 2
    assert store.meta(me.user, me.project).persistent_count == 2


def test_an_expired_entry_gives_up_its_slot_when_the_cap_is_reached(
    store_with: Callable[..., MemoryStore], me: Caller
) -> None:
    # Given a full store of 2, one of which has expired without cleanup
    store = store_with(memory_cap=2)
    store.write(me.user, me.project, entry("sale", expires_at=NOW + timedelta(minutes=1)), NOW)
    store.write(me.user, me.project, entry("tone"), NOW)
    later = NOW + timedelta(hours=1)
    # When a new key is written
    written = store.write(me.user, me.project, entry("palette"), later)
    # Then it fits: the expired entry was expired, with its history record
    assert written is not None and written[1] is True
    assert raw_item(store, me, "sale") is None
    assert history(store, me, "sale")[-1] == ("expired", "v", None, None)
    assert store.meta(me.user, me.project).persistent_count == 2


def test_a_counter_left_behind_by_a_ttl_delete_is_repaired_at_the_cap(
    store_with: Callable[..., MemoryStore], me: Caller
) -> None:
    # Given a full store of 2 whose item DynamoDB's TTL removed behind the counter's back
    store = store_with(memory_cap=2)
    store.write(me.user, me.project, entry("a"), NOW)
    store.write(me.user, me.project, entry("b"), NOW)
    store.client.delete_item(
        TableName=store.table,
        Key=to_item({"owner": owner_of(me.user, me.project), "sk": entry_sk("a", None)}),
    )
    # When
    written = store.write(me.user, me.project, entry("c"), NOW)
    # Then
    assert written is not None
    assert store.meta(me.user, me.project).persistent_count == 2


def test_thread_entries_have_a_cap_of_their_own(
    store_with: Callable[..., MemoryStore], me: Caller
) -> None:
    store = store_with(memory_cap=1, thread_memory_cap=2)
    store.write(me.user, me.project, entry("p"), NOW)
    for key in ("t1", "t2"):
        scoped = entry(key, scope=Scope.THREAD, conversation_id=THREAD)
        assert store.write(me.user, me.project, scoped, NOW) is not None
    with pytest.raises(Conflict, match="this conversation already holds 2 thread entries"):
        store.write(
            me.user, me.project, entry("t3", scope=Scope.THREAD, conversation_id=THREAD), NOW
        )
    other = entry("t1", scope=Scope.THREAD, conversation_id="01JOTHERTHREADAAAAAAAAAAAA")
    assert store.write(me.user, me.project, other, NOW) is not None


# Expiry


def test_expired_entries_are_filtered_on_read_before_any_cleanup(
    store: MemoryStore, me: Caller
) -> None:
    # Given an entry written with an expiry that has already passed
    store.write(me.user, me.project, entry("old", expires_at=NOW - timedelta(seconds=1)), NOW)
    store.write(me.user, me.project, entry("new"), NOW)
    # When
    persistent, thread = store.active(me.user, me.project, None, NOW)
    # Then it is stored, yet no read returns it
    assert raw_item(store, me, "old") is not None
    assert [e.key for e in persistent] == ["new"] and thread == []
    assert store.get(me.user, me.project, "old", None, NOW) is None
    items = store.client.query(**store.persistent_request(me.user, me.project))["Items"]
    assert [e.key for e in store.entries_from(items, NOW)] == ["new"]
    assert [e.key for e in store.entries_from(items)] == ["new", "old"]


def test_an_expiring_entry_is_due_in_its_hour_bucket_and_carries_a_later_ttl(
    store: MemoryStore, me: Caller
) -> None:
    # Given
    expires = NOW + timedelta(minutes=30)
    store.write(me.user, me.project, entry("sale", expires_at=expires), NOW)
    # When
    item = raw_item(store, me, "sale")
    # Then
    bucket, shard = item["dueBucket"].split("#")
    assert bucket == "2025-03-01T12" and 0 <= int(shard) < 8
    assert item["dueAt"] == item["expiresAt"] == clock.stamp(expires)
    grace = timedelta(hours=get_settings().memory_ttl_grace_hours)
    assert item["ttl"] == int((expires + grace).timestamp())
    due = store.client.query(
        TableName=store.table,
        IndexName=BY_DUE,
        KeyConditionExpression="#bucket = :bucket AND #at <= :now",
        ExpressionAttributeNames={"#bucket": "dueBucket", "#at": "dueAt"},
        ExpressionAttributeValues=to_item(
            {":bucket": item["dueBucket"], ":now": clock.stamp(NOW + timedelta(hours=1))}
        ),
    )["Items"]
    keys = [(found["owner"], found["sk"]) for found in map(from_item, due)]
    assert (owner_of(me.user, me.project), "M#sale") in keys


def test_clearing_an_expiry_removes_the_due_and_ttl_attributes(
    store: MemoryStore, me: Caller
) -> None:
    store.write(me.user, me.project, entry("sale", expires_at=NOW + timedelta(hours=1)), NOW)
    store.write(me.user, me.project, entry("sale"), NOW)
    item = raw_item(store, me, "sale")
    assert not {"expiresAt", "dueAt", "dueBucket", "ttl"} & set(item)


def test_expire_deletes_only_an_entry_past_its_time_and_records_it(
    store: MemoryStore, me: Caller
) -> None:
    # Given
    store.write(me.user, me.project, entry("sale", "on", expires_at=NOW + timedelta(hours=1)), NOW)
    # When / Then: not yet
    assert store.expire(me.user, me.project, "sale", None, NOW) is False
    assert store.meta(me.user, me.project).persistent_count == 1
    # When / Then: past its time
    assert store.expire(me.user, me.project, "sale", None, NOW + timedelta(hours=2)) is True
    assert raw_item(store, me, "sale") is None
    assert history(store, me, "sale")[-1] == ("expired", "on", None, None)
    assert store.meta(me.user, me.project).persistent_count == 0


# History and explicit tool calls


def test_every_change_appends_one_history_record(store: MemoryStore, me: Caller) -> None:
    service = service_over(store)
    service.save_explicit(me.user, me.project, THREAD, "tone", "warm", "brand", "persistent")
    service.save_explicit(me.user, me.project, THREAD, "tone", "cool", "brand", "persistent")
    assert service.forget_explicit(me.user, me.project, THREAD, "tone", "persistent") is True
    assert service.forget_explicit(me.user, me.project, THREAD, "tone", "persistent") is False
    records = store.history(me.user, me.project, "tone", None)
    assert [r.action for r in records] == [Action.CREATED, Action.UPDATED, Action.DELETED]
    assert [(r.old_value, r.new_value) for r in records] == [
        (None, "warm"),
        ("warm", "cool"),
        ("cool", None),
    ]
    assert all(r.source == Source.EXPLICIT and r.category == Category.BRAND for r in records)


def test_a_tool_call_with_thread_scope_saves_into_the_current_thread(
    store: MemoryStore, me: Caller
) -> None:
    service = service_over(store)
    saved = service.save_explicit(
        me.user, me.project, THREAD, "hero", "dark", "preferences", "thread"
    )
    assert saved.scope == Scope.THREAD and saved.conversation_id == THREAD
    persistent, thread = store.active(me.user, me.project, THREAD, NOW)
    assert persistent == [] and [e.key for e in thread] == ["hero"]
    assert service.forget_explicit(me.user, me.project, THREAD, "hero", "persistent") is False
    assert service.forget_explicit(me.user, me.project, THREAD, "hero", "thread") is True


def test_background_writers_cannot_claim_to_be_explicit(store: MemoryStore, me: Caller) -> None:
    with pytest.raises(ValueError, match="extracted or consolidated"):
        service_over(store).write_background(me.user, me.project, [entry("tone")])


def test_malformed_background_entries_are_skipped_not_fatal(store: MemoryStore, me: Caller) -> None:
    written = service_over(store).write_background(
        me.user, me.project, [extracted("blank", "\n \t"), extracted("fine", "ok")]
    )
    assert [e.key for e in written] == ["fine"]


# Counters for the gates


def test_only_one_worker_claims_extraction_within_the_cooldown(
    store: MemoryStore, me: Caller
) -> None:
    # Given two workers that run at the same moment
    cooldown = timedelta(seconds=get_settings().extract_cooldown_seconds)
    other = MemoryStore(get_settings())
    # When / Then: the first claims, the second is refused by the condition
    assert store.claim_extraction(me.user, me.project, NOW, cooldown) is True
    assert other.claim_extraction(me.user, me.project, NOW, cooldown) is False
    assert store.claim_extraction(me.user, me.project, NOW + timedelta(hours=3), cooldown) is False
    assert store.claim_extraction(me.user, me.project, NOW + cooldown, cooldown) is True
    assert store.meta(me.user, me.project).last_extraction_at == clock.stamp(NOW + cooldown)


def test_consolidation_is_claimed_only_when_all_three_gates_pass(
    store: MemoryStore, me: Caller
) -> None:
    settings = get_settings()
    gap = timedelta(seconds=settings.consolidate_min_seconds)

    def claim(at: datetime) -> bool:
        return store.claim_consolidation(
            me.user,
            me.project,
            at,
            gap,
            settings.consolidate_min_sessions,
            settings.consolidate_min_memories,
        )

    # Given too few sessions and memories
    assert claim(NOW) is False
    for _ in range(settings.consolidate_min_sessions):
        store.count_session(me.user, me.project)
    assert claim(NOW) is False
    for index in range(settings.consolidate_min_memories):
        store.write(me.user, me.project, entry(f"m{index}"), NOW)
    # When / Then: all three pass, once; the session count restarts
    assert claim(NOW) is True
    meta = store.meta(me.user, me.project)
    assert meta.sessions_since_consolidation == 0
    assert meta.last_consolidation_at == clock.stamp(NOW)
    for _ in range(settings.consolidate_min_sessions):
        store.count_session(me.user, me.project)
    assert claim(NOW + gap - timedelta(minutes=1)) is False
    assert claim(NOW + gap) is True


def test_the_persistent_count_follows_creates_and_deletes(store: MemoryStore, me: Caller) -> None:
    for key in ("a", "b", "c"):
        store.write(me.user, me.project, entry(key), NOW)
    store.write(me.user, me.project, entry("a", "again"), NOW)
    store.delete(me.user, me.project, "b", None, Source.EXPLICIT, NOW)
    store.write(me.user, me.project, entry("t", scope=Scope.THREAD, conversation_id=THREAD), NOW)
    assert store.meta(me.user, me.project).persistent_count == 2


def test_the_chat_can_send_the_memory_queries_itself(store: MemoryStore, me: Caller) -> None:
    # Given
    store.write(me.user, me.project, entry("tone"), NOW)
    store.write(me.user, me.project, entry("hero", scope=Scope.THREAD, conversation_id=THREAD), NOW)
    # When two requests are sent as they are
    persistent = store.client.query(**store.persistent_request(me.user, me.project))["Items"]
    thread = store.client.query(**store.thread_request(me.user, me.project, THREAD))["Items"]
    # Then
    assert [e.key for e in store.entries_from(persistent, NOW)] == ["tone"]
    assert [e.key for e in store.entries_from(thread, NOW)] == ["hero"]
