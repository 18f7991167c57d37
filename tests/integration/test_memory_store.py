"""The memory store and service over the embedded DynamoDB: the rules the HTTP API cannot
reach (background writes, the counters the gates read, expiry bookkeeping), with the
clock passed in so no test sleeps."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
import logging
from typing import Any
import uuid

from botocore.exceptions import ClientError
import pytest

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import Action, Category, MemoryEntry, Scope, Source
from recall.domain.turn_memory import TurnMemory
from recall.errors import Conflict
from recall.services.access import ProjectAccess
from recall.services.memories import MemoryService
from recall.settings import get_settings
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import cancellation_codes, dynamodb_client, from_item, to_item
from recall.store.keys import owner_key as owner_of
from recall.store.memories import HeldMemory, MemoryStore
from recall.store.memory_items import BY_DUE, entry_sk
from recall.store.memory_transactions import TurnMemoryWrites
from recall.store.projects import ProjectStore

NOW = datetime.fromisoformat("2025-03-01T12:00:00+00:00")
THREAD = "01JTHREADAAAAAAAAAAAAAAAAA"
REFUSED = "ConditionalCheckFailed"


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
    def make(client: Any = None, **limits: Any) -> MemoryStore:
        return MemoryStore(get_settings().model_copy(update=limits), client)

    return make


@pytest.fixture
def store(store_with: Callable[..., MemoryStore]) -> MemoryStore:
    return store_with()


def write_each(store: MemoryStore, me: Caller, entries: list[MemoryEntry]) -> list[MemoryEntry]:
    """A background job's writes: each on its own, the ones the store took."""
    written = (store.write(me.user, me.project, entry, NOW) for entry in entries)
    return [saved[0] for saved in written if saved is not None]


def service_over(store: MemoryStore) -> MemoryService:
    settings = get_settings()
    return MemoryService(
        settings, ProjectAccess(ProjectStore(settings)), ConversationStore(settings), store
    )


class ToolTurn:
    """A turn's memory tools over the real store: each call is held, then saved as the
    turn's transaction saves memory (its items and counter moves), one turn per call."""

    def __init__(self, store: MemoryStore, me: Caller) -> None:
        self._store = store
        self._me = me
        self._service = service_over(store)

    def save(self, key: str, value: str, category: str, scope: str) -> MemoryEntry:
        memory, held = self._memory()
        memory.save(self._service.tool_entry(THREAD, key, value, category, scope))
        return self._land(memory, held).stored[0]

    def forget(self, key: str, scope: str) -> bool:
        memory, held = self._memory()
        if not memory.forget(*self._service.tool_place(THREAD, key, scope)):
            return False
        self._land(memory, held)
        return True

    def _memory(self) -> tuple[TurnMemory, HeldMemory]:
        held = self._store.held(self._me.user, self._me.project, THREAD, clock.now())
        return self._service.turn_memory(held), held

    def _land(self, memory: TurnMemory, held: HeldMemory) -> TurnMemoryWrites:
        writes = self._store.turn_writes(
            self._me.user, self._me.project, held, memory.changes(), clock.now()
        )
        moves = [move.update(writes.table) for move in writes.moves.values()]
        self._store.client.transact_write_items(TransactItems=[*writes.items, *moves])
        return writes


def entry(key: str, value: str = "v", **fields: Any) -> MemoryEntry:
    return MemoryEntry.model_validate(
        {"key": key, "value": value, "category": Category.CONTEXT, **fields}
    )


def extracted(key: str, value: str = "v", **fields: Any) -> MemoryEntry:
    return entry(key, value, source=Source.EXTRACTED, confidence=0.8, **fields)


def table() -> str:
    return get_settings().memories_table


def raw_item(store: MemoryStore, me: Caller, key: str, thread: str | None = None) -> Any:
    found = store.client.get_item(
        TableName=table(),
        Key=to_item({"owner": owner_of(me.user, me.project), "sk": entry_sk(key, thread)}),
    ).get("Item")
    return from_item(found) if found else None


def active_entry(store: MemoryStore, me: Caller, key: str) -> MemoryEntry | None:
    """The caller's persistent entry under ``key``, as every reader sees it."""
    persistent, _ = store.active(me.user, me.project, None, NOW)
    return next((found for found in persistent if found.key == key), None)


class EdgeClient:
    """The real DynamoDB client, with a seam at the boto3 edge for what the API cannot
    time; every call not overridden goes through unchanged."""

    def __init__(self) -> None:
        self.real = dynamodb_client()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class RivalLandsFirst(EdgeClient):
    """Runs ``rival`` (a real write through another store) once: after the store has read,
    just before its first transaction reaches DynamoDB."""

    def __init__(self, rival: Callable[[], object]) -> None:
        super().__init__()
        self.rival: Callable[[], object] | None = rival

    def transact_write_items(self, **request: Any) -> Any:
        if self.rival is not None:
            rival, self.rival = self.rival, None
            rival()
        return self.real.transact_write_items(**request)


class BelievesNoEntryIsExplicit(EdgeClient):
    """A background writer that believes it may write anyway: every entry it reads says
    ``extracted`` (at its real version). Records how DynamoDB answered each transaction."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[list[str]] = []

    def get_item(self, **request: Any) -> Any:
        found = self.real.get_item(**request)
        if "source" in found.get("Item", {}):
            found["Item"]["source"] = {"S": Source.EXTRACTED.value}
        return found

    def transact_write_items(self, **request: Any) -> Any:
        try:
            answer = self.real.transact_write_items(**request)
        except ClientError as exc:
            self.answers.append(cancellation_codes(exc))
            raise
        self.answers.append([])
        return answer


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
    written = write_each(store, me, [extracted("tone", "corporate"), extracted("palette", "navy")])
    # Then only the new key is written; the explicit entry and its history are untouched
    assert [e.key for e in written] == ["palette"]
    kept = active_entry(store, me, "tone")
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
    kept = active_entry(store, me, "tone")
    assert kept is not None and kept.value == "warm"


def test_the_explicit_rule_is_a_condition_on_the_write_not_a_read(
    store: MemoryStore, store_with: Callable[..., MemoryStore], me: Caller
) -> None:
    # Given an explicit entry, and a background writer whose every read says the entry is
    # a background one
    store.write(me.user, me.project, entry("tone", "warm"), NOW)
    believer = BelievesNoEntryIsExplicit()
    # When it writes the key
    with pytest.raises(Conflict):
        store_with(believer).write(me.user, me.project, extracted("tone", "corporate"), NOW)
    # Then each of its attempts reached DynamoDB, which refused the entry's own put every
    # time; the entry and its history are untouched
    assert len(believer.answers) == get_settings().memory_write_attempts
    assert all(codes[:1] == [REFUSED] for codes in believer.answers)
    kept = active_entry(store, me, "tone")
    assert kept is not None and kept.value == "warm" and kept.source == Source.EXPLICIT
    assert history(store, me, "tone") == [("created", None, "warm", "explicit")]


def test_an_explicit_write_that_lands_during_a_background_write_wins(
    store: MemoryStore,
    store_with: Callable[..., MemoryStore],
    me: Caller,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a background writer that reads "tone" as absent, and the user's explicit
    # "tone" landing before the writer's transaction does
    user = RivalLandsFirst(lambda: store.write(me.user, me.project, entry("tone", "warm"), NOW))
    # When
    with caplog.at_level(logging.INFO, logger="recall"):
        written = store_with(user).write(me.user, me.project, extracted("tone", "corporate"), NOW)
    # Then the background write gave way, and said so in the log
    assert written is None and user.rival is None
    kept = active_entry(store, me, "tone")
    assert kept is not None and kept.value == "warm" and kept.source == Source.EXPLICIT
    assert history(store, me, "tone") == [("created", None, "warm", "explicit")]
    assert any(r.getMessage().startswith("background memory write skipped") for r in caplog.records)


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


def test_consolidation_retires_only_the_entry_its_plan_read_though_an_import_kept_its_time(
    store: MemoryStore, me: Caller
) -> None:
    # Given an imported entry, as a consolidation plan read it
    said = {"created_at": "2025-01-01T00:00:00.000Z", "updated_at": "2025-02-01T00:00:00.000Z"}
    store.write(me.user, me.project, entry("tone", "warm", source=Source.IMPORTED, **said), NOW)
    read = active_entry(store, me, "tone")
    assert read is not None and read.updated_at == said["updated_at"]
    # When another import gives it a new value said at the same time, then the plan runs
    other = entry("tone", "brief", source=Source.IMPORTED, **said)
    store.write(me.user, me.project, other, NOW + timedelta(hours=1))
    retired = store.retire(me.user, me.project, read, "merge: duplicate", NOW)
    # Then the entry the plan never saw stays
    kept = active_entry(store, me, "tone")
    assert not retired
    assert kept is not None and (kept.value, kept.updated_at) == ("brief", said["updated_at"])


def test_an_imported_entry_already_held_as_it_comes_is_not_written_again(
    store: MemoryStore, me: Caller
) -> None:
    # Given a thread entry an import wrote, with a confidence, an expiry and its own times
    said = {
        "created_at": "2025-01-01T00:00:00.000Z",
        "updated_at": "2025-02-01T00:00:00.000Z",
        "source": Source.IMPORTED,
        "confidence": 0.7,
        "expires_at": NOW + timedelta(days=3),
        "scope": Scope.THREAD,
        "conversation_id": THREAD,
    }
    imported = entry("tone", "warm", **said)
    store.write(me.user, me.project, imported, NOW)
    version = raw_item(store, me, "tone", THREAD)["version"]
    # When the same entry comes again, then one that says something else
    again = store.write(me.user, me.project, imported, NOW + timedelta(hours=1))
    assert raw_item(store, me, "tone", THREAD)["version"] == version
    other = store.write(me.user, me.project, entry("tone", "brief", **said), NOW)
    # Then the first wrote nothing, the second wrote as every write does
    records = store.history(me.user, me.project, "tone", THREAD)
    assert again == (imported, False)
    assert other is not None and other[0].value == "brief"
    assert [(r.action.value, r.new_value) for r in records] == [
        ("created", "warm"),
        ("updated", "brief"),
    ]


def test_an_explicit_write_replaces_a_background_entry(store: MemoryStore, me: Caller) -> None:
    store.write(me.user, me.project, extracted("palette", "navy"), NOW)
    saved = ToolTurn(store, me).save("palette", "teal", "preferences", "persistent")
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
    written = write_each(store, me, [extracted(f"found_{i}") for i in range(4)])
    # Then two fit, two are dropped, and the log says why
    assert [e.key for e in written] == ["found_0", "found_1"]
    persistent, _ = store.active(me.user, me.project, None, NOW)
    assert len(persistent) == 3
    dropped = [
        r for r in caplog.records if r.getMessage().startswith("background memory write dropped")
    ]
    assert [getattr(r, "key", None) for r in dropped] == ["found_2", "found_3"]


def test_the_cap_is_checked_in_the_write_itself_so_a_racing_create_cannot_pass_it(
    store_with: Callable[..., MemoryStore], me: Caller
) -> None:
    # Given a cap of 2 with one entry, and a writer whose read is overtaken by a rival
    # taking the last slot before the writer's transaction lands
    rival = store_with(memory_cap=2)
    rival.write(me.user, me.project, entry("a"), NOW)
    overtaken = RivalLandsFirst(lambda: rival.write(me.user, me.project, entry("rival"), NOW))
    store = store_with(overtaken, memory_cap=2)
    # When
    with pytest.raises(Conflict, match="already holds 2"):
        store.write(me.user, me.project, entry("late"), NOW)
    # Then the counter refused it in the same transaction, and the store holds the two
    # that came first
    assert overtaken.rival is None
    persistent, _ = store.active(me.user, me.project, None, NOW)
    assert [e.key for e in persistent] == ["a", "rival"]
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
        TableName=table(),
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
    assert active_entry(store, me, "old") is None
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
        TableName=table(),
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


def test_entries_and_their_history_keep_their_attribute_names_and_keys(
    store: MemoryStore, me: Caller
) -> None:
    # Given an expiring thread entry, written then updated
    expires = NOW + timedelta(hours=1)
    for value in ("dark", "light"):
        fields = {"scope": Scope.THREAD, "conversation_id": THREAD, "expires_at": expires}
        store.write(me.user, me.project, entry("hero", value, **fields), NOW)
    # When its items are read as DynamoDB holds them
    item = raw_item(store, me, "hero", THREAD)
    records = store.client.query(
        TableName=table(),
        KeyConditionExpression="#owner = :owner AND begins_with(#sk, :prefix)",
        ExpressionAttributeNames={"#owner": "owner", "#sk": "sk"},
        ExpressionAttributeValues=to_item(
            {":owner": owner_of(me.user, me.project), ":prefix": "H#"}
        ),
    )["Items"]
    # Then the names existing data and indexes depend on are unchanged
    assert set(item) == {
        *("owner", "sk", "key", "value", "category", "scope", "conversationId", "source"),
        *("confidence", "createdAt", "updatedAt", "version"),
        *("expiresAt", "dueAt", "dueBucket", "ttl"),
    }
    assert item["sk"] == f"T#{THREAD}#hero" and item["version"] == 2
    history_names = {"owner", "sk", "key", "scope", "conversationId", "action", "category"}
    assert [set(from_item(r)) for r in records] == [
        history_names | {"newValue", "source", "at"},
        history_names | {"oldValue", "newValue", "source", "at"},
    ]
    assert all(from_item(r)["sk"].startswith(f"H#T#{THREAD}#hero#") for r in records)


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
    tools = ToolTurn(store, me)
    tools.save("tone", "warm", "brand", "persistent")
    tools.save("tone", "cool", "brand", "persistent")
    assert tools.forget("tone", "persistent") is True
    assert tools.forget("tone", "persistent") is False
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
    tools = ToolTurn(store, me)
    saved = tools.save("hero", "dark", "preferences", "thread")
    assert saved.scope == Scope.THREAD and saved.conversation_id == THREAD
    persistent, thread = store.active(me.user, me.project, THREAD, NOW)
    assert persistent == [] and [e.key for e in thread] == ["hero"]
    assert tools.forget("hero", "persistent") is False
    assert tools.forget("hero", "thread") is True


# Counters for the gates


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
