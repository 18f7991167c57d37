"""The Memories table's items: its sort keys and item models, apart from the rules that
write them (``store/memories.py``).

Under ``owner = <userId>#<projectId>``: persistent entries (``M#<key>``), thread entries
(``T#<conversationId>#<key>``), the ``META`` counters and each entry's change history
(``H#<entry sort key>#<ulid>``). Keys never contain ``#``, so every prefix is unambiguous.
``META.persistentCount`` counts persistent entries; each thread's are counted on its
counter item, ``T#<conversationId>#`` (the empty key no entry can have), so deleting the
thread's prefix deletes its counter too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import Field

from recall.domain import clock
from recall.domain.memory import HistoryRecord, MemoryEntry, MemoryMeta
from recall.store.dynamodb import Item, StoredItem, to_item, to_value
from recall.store.keys import due_bucket

PERSISTENT_PREFIX = "M#"
THREAD_PREFIX = "T#"
HISTORY_PREFIX = "H#"
META_SK = "META"
BY_DUE = "byDue"
PERSISTENT_COUNT = "persistentCount"
THREAD_COUNT = "entryCount"


def thread_prefix(conversation_id: str) -> str:
    """A thread's entries, and its counter item's own sort key."""
    return f"{THREAD_PREFIX}{conversation_id}#"


def scope_prefix(conversation_id: str | None) -> str:
    """The entries of one scope: a thread's with ``conversation_id``, else persistent."""
    return thread_prefix(conversation_id) if conversation_id else PERSISTENT_PREFIX


def entry_sk(key: str, conversation_id: str | None) -> str:
    """``conversation_id`` names a thread entry; ``None`` a persistent one."""
    return scope_prefix(conversation_id) + key


def entry_place(sk: str) -> tuple[str, str | None] | None:
    """``(key, conversation_id)`` of an entry's sort key; ``None`` for any other item."""
    if sk.startswith(PERSISTENT_PREFIX):
        return sk.removeprefix(PERSISTENT_PREFIX), None
    if sk.startswith(THREAD_PREFIX):
        conversation_id, _, key = sk.removeprefix(THREAD_PREFIX).partition("#")
        return (key, conversation_id) if key else None
    return None


def history_prefix(key: str, conversation_id: str | None) -> str:
    return f"{HISTORY_PREFIX}{entry_sk(key, conversation_id)}#"


def item_key(owner: str, sk: str) -> Item:
    return to_item({"owner": owner, "sk": sk})


def meta_key(owner: str) -> Item:
    return item_key(owner, META_SK)


def counter(owner: str, conversation_id: str | None) -> tuple[Item, str]:
    """The item and attribute that count a scope's entries."""
    if conversation_id is None:
        return meta_key(owner), PERSISTENT_COUNT
    return item_key(owner, thread_prefix(conversation_id)), THREAD_COUNT


def prefix_query(table: str, owner: str, prefix: str, consistent: bool = True) -> dict[str, Any]:
    """Query kwargs for every item of ``owner`` whose sort key starts with ``prefix``."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#owner = :owner AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#owner": "owner", "#sk": "sk"},
        "ExpressionAttributeValues": {":owner": to_value(owner), ":prefix": to_value(prefix)},
        "ConsistentRead": consistent,
    }


def is_entry(item: Item) -> bool:
    """Entry items, not a thread's counter item that shares their prefix."""
    return "key" in item


class EntryItem(StoredItem, MemoryEntry):
    """An entry as stored: the entry, its version for conditional writes and, when it
    expires, ``dueAt`` and ``dueBucket`` for the ``byDue`` index and a later ``ttl``."""

    owner: str
    sk: str
    version: int
    due_at: str | None = None
    due_bucket: str | None = None
    ttl: int | None = None

    @classmethod
    def of(
        cls, owner: str, entry: MemoryEntry, version: int, shards: int, ttl_grace: timedelta
    ) -> EntryItem:
        expiry: dict[str, Any] = {}
        if entry.expires_at is not None:
            expiry = {
                "due_at": entry.expires_at,
                "due_bucket": due_bucket(owner, entry.expires_at, shards),
                "ttl": int((clock.parse(entry.expires_at) + ttl_grace).timestamp()),
            }
        return cls.model_validate(
            {
                **entry.model_dump(),
                **expiry,
                "owner": owner,
                "sk": entry_sk(entry.key, entry.conversation_id),
                "version": version,
            }
        )

    def entry(self) -> MemoryEntry:
        return MemoryEntry.model_validate(self.model_dump(include=set(MemoryEntry.model_fields)))


class HistoryItem(StoredItem, HistoryRecord):
    """One history record, sorted after the entry's earlier ones by its ULID."""

    owner: str
    sk: str

    @classmethod
    def of(cls, owner: str, record: HistoryRecord, record_id: str) -> HistoryItem:
        sk = history_prefix(record.key, record.conversation_id) + record_id
        return cls.model_validate({**record.model_dump(), "owner": owner, "sk": sk})

    def record(self) -> HistoryRecord:
        return HistoryRecord.model_validate(
            self.model_dump(include=set(HistoryRecord.model_fields))
        )


class MetaItem(StoredItem, MemoryMeta):
    """The ``META`` counters, as the conditional updates of the store leave them: when a
    consolidation falls due is ``dueAt``, beside its ``dueBucket`` for the ``byDue`` index."""

    consolidation_due_at: str | None = Field(default=None, alias="dueAt")
    due_bucket: str | None = None

    def meta(self) -> MemoryMeta:
        return MemoryMeta.model_validate(self.model_dump(include=set(MemoryMeta.model_fields)))
