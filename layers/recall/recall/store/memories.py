"""The Memories table's store: the reads (a turn's, a listing's, an export's) and the
batch writes over a caller's partition (an import's history, a deleted thread's entries,
an erasure), with the writes of one entry it inherits from ``MemoryWrites``
(``store/memory_writes.py``): each change read, sent as the one transaction
``memory_transactions`` builds, and retried, given way or made room for. Keys and item
models are ``memory_items``'s.

Expiry. An expiring entry is listed by the sparse ``byDue`` index the expire job reads,
and carries a ``ttl`` some hours later, as a backstop for that job. Reads judge expiry
themselves, whether or not a cleanup has run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from recall.domain.memory import (
    HistoryRecord,
    MemoryEntry,
    MemoryMeta,
    is_active,
    sort_for_listing,
)
from recall.domain.turn_memory import MemoryChange
from recall.store.cursors import (
    encode_cursor,
    list_tag,
    position_in,
)
from recall.store.dynamodb import Item, batch_delete, batch_write, delete_found, from_item, to_value
from recall.store.keys import owner_key
from recall.store.memory_items import (
    HISTORY_PREFIX,
    PERSISTENT_PREFIX,
    THREAD_PREFIX,
    EntryItem,
    HistoryItem,
    MetaItem,
    entry_sk,
    history_prefix,
    is_entry,
    item_key,
    meta_key,
    prefix_query,
    scope_prefix,
    thread_prefix,
)
from recall.store.memory_transactions import TurnMemoryWrites
from recall.store.memory_writes import MemoryWrites


@dataclass
class HeldMemory:
    """The caller's entries as a turn read them: the active ones for the prompt, and each
    entry item with its version, for the turn's own transaction."""

    persistent: list[MemoryEntry]
    thread: list[MemoryEntry]
    items: dict[str, EntryItem] = field(default_factory=dict)

    def holds(self, change: MemoryChange) -> bool:
        """Whether the entry a change names is stored (expired or not)."""
        return entry_sk(change.key, change.conversation_id) in self.items

    def merged(self, thread: HeldMemory) -> HeldMemory:
        """These persistent entries with another read's thread entries: the two scopes of a
        turn are read at once, by two queries."""
        return HeldMemory(self.persistent, thread.thread, {**self.items, **thread.items})


class MemoryStore(MemoryWrites):
    def persistent_request(self, user_id: str, project_id: str) -> dict[str, Any]:
        """Query kwargs for a caller's persistent entries (50 at most: one page)."""
        return prefix_query(self._table, owner_key(user_id, project_id), scope_prefix(None))

    def thread_request(self, user_id: str, project_id: str, conversation_id: str) -> dict[str, Any]:
        """Query kwargs for one thread's entries (with its counter item, which
        ``entries_from`` skips)."""
        owner = owner_key(user_id, project_id)
        return prefix_query(self._table, owner, thread_prefix(conversation_id))

    @staticmethod
    def entries_from(items: list[Item], now: datetime | None = None) -> list[MemoryEntry]:
        """Entries of a query's items in listing order; expired ones left out when ``now``
        is given."""
        entries = [EntryItem.model_validate(from_item(i)).entry() for i in items if is_entry(i)]
        return sort_for_listing(e for e in entries if now is None or is_active(e, now))

    def active(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> tuple[list[MemoryEntry], list[MemoryEntry]]:
        """The caller's unexpired persistent entries and, with a thread, that thread's;
        expiry is judged here, whether or not a cleanup has run."""
        held = self.held(user_id, project_id, conversation_id, now)
        return held.persistent, held.thread

    def held(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> HeldMemory:
        """What ``active`` reads, with the versions a turn's transaction conditions on."""
        persistent = self.held_scope(user_id, project_id, None, now)
        if conversation_id is None:
            return persistent
        return persistent.merged(self.held_scope(user_id, project_id, conversation_id, now))

    def held_scope(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> HeldMemory:
        """One scope, by one query: the persistent entries (``conversation_id`` None) or
        one thread's, so a turn can send both queries at once.

        Strongly consistent, on purpose: an entry the previous turn's tools (or a
        ``PUT …/memories``) wrote a moment ago must be in this turn's prompt, since a rule
        the user has just stated and the model then ignores is the failure this product
        exists to prevent; and the turn's transaction conditions on the versions read here,
        so a stale read would cost a retry. The scope is at most 50 short entries, so the
        difference is half a read unit or so a turn."""
        request = (
            self.persistent_request(user_id, project_id)
            if conversation_id is None
            else self.thread_request(user_id, project_id, conversation_id)
        )
        items = [EntryItem.model_validate(from_item(i)) for i in self._all(request) if is_entry(i)]
        active = sort_for_listing(e for e in (item.entry() for item in items) if is_active(e, now))
        by_sk = {item.sk: item for item in items}
        if conversation_id is None:
            return HeldMemory(active, [], by_sk)
        return HeldMemory([], active, by_sk)

    def refreshed(
        self, user_id: str, project_id: str, held: HeldMemory, changes: list[MemoryChange]
    ) -> HeldMemory:
        """``held`` with the changed entries read again, after another writer moved them."""
        owner = owner_key(user_id, project_id)
        items = dict(held.items)
        for change in changes:
            sk = entry_sk(change.key, change.conversation_id)
            current = self._current(owner, sk)
            if current is None:
                items.pop(sk, None)
            else:
                items[sk] = current
        return replace(held, items=items)

    def turn_writes(
        self,
        user_id: str,
        project_id: str,
        held: HeldMemory,
        changes: list[MemoryChange],
        now: datetime,
    ) -> TurnMemoryWrites:
        """The transaction items of a turn's memory changes, conditioned on the versions in
        ``held``. A forget of an entry already gone or expired has nothing to do."""
        return self._transactions.turn(owner_key(user_id, project_id), held.items, changes, now)

    def history(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None
    ) -> list[HistoryRecord]:
        """Every recorded change of one entry, oldest first (it outlives the entry)."""
        owner = owner_key(user_id, project_id)
        query = prefix_query(self._table, owner, history_prefix(key, conversation_id))
        return [HistoryItem.model_validate(from_item(item)).record() for item in self._all(query)]

    def history_page(
        self,
        user_id: str,
        project_id: str,
        key: str,
        conversation_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[HistoryRecord], str | None]:
        """The newest ``limit`` changes of one entry before the cursor, oldest first; the
        next cursor reaches further back, in this entry's history only."""
        owner = owner_key(user_id, project_id)
        prefix = history_prefix(key, conversation_id)
        query = {**prefix_query(self._table, owner, prefix), "ScanIndexForward": False}
        query["Limit"] = limit
        entry = list_tag(owner, entry_sk(key, conversation_id))
        if cursor:
            start = position_in(cursor, ("entry", entry), "at", "memory entry")
            query["ExclusiveStartKey"] = item_key(owner, prefix + start)
        result = self.client.query(**query)
        items = result["Items"]
        records = [HistoryItem.model_validate(from_item(item)).record() for item in reversed(items)]
        if items and result.get("LastEvaluatedKey"):
            last = str(from_item(items[-1])["sk"]).removeprefix(prefix)
            return records, encode_cursor({"entry": entry, "at": last})
        return records, None

    def every(self, user_id: str, project_id: str) -> list[tuple[MemoryEntry, list[HistoryRecord]]]:
        """Every stored entry of both scopes (expired ones too: the caller judges) with its
        history, oldest change first: what an export reads."""
        owner = owner_key(user_id, project_id)
        history: dict[str, list[HistoryRecord]] = {}
        for item in self._all(prefix_query(self._table, owner, HISTORY_PREFIX)):
            stored = HistoryItem.model_validate(from_item(item))
            place = stored.sk.removeprefix(HISTORY_PREFIX).rsplit("#", 1)[0]
            history.setdefault(place, []).append(stored.record())
        entries = []
        for prefix in (PERSISTENT_PREFIX, THREAD_PREFIX):
            for item in filter(is_entry, self._all(prefix_query(self._table, owner, prefix))):
                stored_entry = EntryItem.model_validate(from_item(item))
                entries.append((stored_entry.entry(), history.get(stored_entry.sk, [])))
        return entries

    def meta(self, user_id: str, project_id: str) -> MemoryMeta:
        item = self.client.get_item(
            TableName=self._table, Key=meta_key(owner_key(user_id, project_id)), ConsistentRead=True
        ).get("Item")
        return MetaItem.model_validate(from_item(item) if item else {}).meta()

    def add_history(
        self, user_id: str, project_id: str, records: list[tuple[HistoryRecord, str]]
    ) -> int:
        """Save history records as they were (an import's), each under its given ULID: the
        same records written twice are the same items."""
        owner = owner_key(user_id, project_id)
        requests: list[Any] = [
            {"PutRequest": {"Item": HistoryItem.of(owner, record, record_id).item()}}
            for record, record_id in records
        ]
        return batch_write(
            self.client,
            self._table,
            requests,
            attempts=self._batch_attempts,
            base_seconds=self._batch_base_seconds,
        )

    def delete_thread(self, user_id: str, project_id: str, conversation_id: str) -> int:
        """Delete a thread's own entries and their history (the thread is being deleted)."""
        owner = owner_key(user_id, project_id)
        deleted = 0
        for prefix in (
            thread_prefix(conversation_id),
            HISTORY_PREFIX + thread_prefix(conversation_id),
        ):
            query = prefix_query(self._table, owner, prefix, consistent=False)
            query["ProjectionExpression"] = "#owner, #sk"
            for page in self.client.get_paginator("query").paginate(**query):
                deleted += batch_delete(
                    self.client,
                    self._table,
                    page["Items"],
                    self._batch_size,
                    attempts=self._batch_attempts,
                    base_seconds=self._batch_base_seconds,
                )
        return deleted

    def erase(self, user_id: str, project_id: str, max_items: int) -> int:
        """Delete up to ``max_items`` of everything the caller has in the project's memory:
        entries, history, counters and schedule (one partition). Fewer means none are left."""
        owner = owner_key(user_id, project_id)
        query = {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": to_value(owner)},
            "ConsistentRead": True,
        }
        return delete_found(self.client, query, ("owner", "sk"), max_items, self._batch_size)
