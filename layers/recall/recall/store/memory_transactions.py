"""The one transaction of each change to a memory entry. Every rule that a race could
break is a condition DynamoDB checks as the change lands, never a read before it: the
version read (or absence) of the entry, a background write never replacing an active
explicit entry, a counter that moves only while below its cap, an expiry that has passed.

A create moves its scope's counter in the same transaction as the entry; an update reuses
its slot; a removal frees it. Each change appends its history record in the same
transaction too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import (
    BACKGROUND_SOURCES,
    Action,
    HistoryRecord,
    MemoryEntry,
    Source,
    is_active,
)
from recall.domain.turn_memory import MemoryChange
from recall.settings import Settings
from recall.store.dynamodb import to_value
from recall.store.memory_items import EntryItem, HistoryItem, counter, entry_sk, item_key


def kept_times(entry: MemoryEntry) -> bool:
    """Whether a write stores the entry's own ``createdAt`` and ``updatedAt``: an import's
    does (when the value was said, which consolidation weighs), every other write is
    stamped as it lands."""
    return entry.source == Source.IMPORTED and bool(entry.created_at and entry.updated_at)


@dataclass(frozen=True)
class CountMove:
    """A scope's counter moved by ``delta``; a step up only while the scope has room for
    it. A turn moves each counter once, as a transaction names an item once."""

    key: dict[str, Any]
    attribute: str
    delta: int
    cap: int

    def clause(self, name: str, value: str) -> tuple[str, str | None, dict[str, Any]]:
        """``ADD`` clause, condition (or ``None``) and values, under placeholders ``name``
        and ``value``, for an update that may move other attributes of the item too."""
        values = {value: to_value(self.delta)}
        if self.delta <= 0:
            return f"{name} {value}", None, values
        values[f"{value}Room"] = to_value(self.cap - self.delta)
        condition = f"attribute_not_exists({name}) OR {name} <= {value}Room"
        return f"{name} {value}", condition, values

    def update(self, table: str) -> dict[str, Any]:
        add, condition, values = self.clause("#count", ":delta")
        update: dict[str, Any] = {
            "TableName": table,
            "Key": self.key,
            "UpdateExpression": f"ADD {add}",
            "ExpressionAttributeNames": {"#count": self.attribute},
            "ExpressionAttributeValues": values,
        }
        if condition:
            update["ConditionExpression"] = condition
        return {"Update": update}


@dataclass
class TurnMemoryWrites:
    """A turn's memory changes as transaction items, with the counter moves kept apart: the
    turn store merges the persistent one into the ``META`` update it may send anyway."""

    table: str
    owner: str
    items: list[Any]
    moves: dict[str | None, CountMove]
    stored: list[MemoryEntry]
    forgotten: list[str]


class MemoryTransactions:
    """Builds the ``TransactItems`` the store sends; sends nothing itself."""

    def __init__(self, settings: Settings) -> None:
        self._table = settings.memories_table
        self._cap = settings.memory_cap
        self._thread_cap = settings.thread_memory_cap
        self._shards = settings.due_shards
        self._ttl_grace = timedelta(hours=settings.memory_ttl_grace_hours)

    def cap(self, conversation_id: str | None) -> int:
        """The cap of a scope: a thread's with ``conversation_id``, else persistent."""
        return self._cap if conversation_id is None else self._thread_cap

    def write(
        self,
        owner: str,
        entry: MemoryEntry,
        current: EntryItem | None,
        now: datetime,
        reason: str | None = None,
        counted: bool = True,
    ) -> tuple[MemoryEntry, list[Any]]:
        """The entry as it will be stored, and its transaction: the entry under its
        condition, the counter when it takes a new slot (item 1; left to the caller when
        not ``counted``), and its history records. Writing over an expired entry is a
        create, recorded as ``expired`` then ``created``. An imported entry keeps the times
        its document gave it (``kept_times``)."""
        previous = current.entry() if current else None
        live = previous is not None and is_active(previous, now)
        at = clock.stamp(now)
        stored = (
            entry
            if kept_times(entry)
            else entry.model_copy(
                update={
                    "created_at": previous.created_at if previous and live else at,
                    "updated_at": at,
                }
            )
        )
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if current is None:
            condition = "attribute_not_exists(#sk)"
            names["#sk"] = "sk"
        else:
            condition = "#version = :version"
            names["#version"] = "version"
            values[":version"] = to_value(current.version)
        if entry.source in BACKGROUND_SOURCES:
            condition = (
                f"({condition}) AND (attribute_not_exists(#sk) OR #source <> :explicit"
                " OR #expiresAt <= :now)"
            )
            names.update({"#sk": "sk", "#source": "source", "#expiresAt": "expiresAt"})
            values.update({":explicit": to_value(Source.EXPLICIT.value), ":now": to_value(at)})
        version = current.version + 1 if current else 1
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": EntryItem.of(owner, stored, version, self._shards, self._ttl_grace).item(),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            put["ExpressionAttributeValues"] = values
        request: list[Any] = [{"Put": put}]
        if current is None and counted:
            request.append(self.move(owner, entry.conversation_id, 1).update(self._table))
        if previous is not None and not live:
            request.append(
                self._history_put(owner, previous, Action.EXPIRED, previous.value, None, None, now)
            )
        if live and previous is not None:
            request.append(
                self._history_put(
                    owner,
                    stored,
                    Action.UPDATED,
                    previous.value,
                    stored.value,
                    entry.source,
                    now,
                    reason,
                )
            )
        else:
            request.append(
                self._history_put(
                    owner, stored, Action.CREATED, None, stored.value, entry.source, now, reason
                )
            )
        return stored, request

    def removal(
        self,
        owner: str,
        current: EntryItem,
        source: Source | None,
        now: datetime,
        reason: str | None = None,
        consolidating: bool = False,
        counted: bool = True,
    ) -> list[Any]:
        """The entry at the version read, deleted with its slot and its history record.
        ``source`` deleted it (a background source never an explicit entry, except that
        consolidation may, at the exact version its plan read); ``None`` means it expired,
        which the condition checks too."""
        entry = current.entry()
        condition = "#version = :version"
        names = {"#version": "version"}
        values: dict[str, Any] = {":version": to_value(current.version)}
        if source is None:
            condition += " AND #expiresAt <= :now"
            names["#expiresAt"] = "expiresAt"
            values[":now"] = to_value(clock.stamp(now))
        elif source in BACKGROUND_SOURCES and not consolidating:
            condition += " AND #source <> :explicit"
            names["#source"] = "source"
            values[":explicit"] = to_value(Source.EXPLICIT.value)
        action = Action.EXPIRED if source is None else Action.DELETED
        delete = {
            "Delete": {
                "TableName": self._table,
                "Key": item_key(owner, current.sk),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        history = self._history_put(owner, entry, action, entry.value, None, source, now, reason)
        if not counted:
            return [delete, history]
        return [delete, self.move(owner, entry.conversation_id, -1).update(self._table), history]

    def turn(
        self,
        owner: str,
        held: dict[str, EntryItem],
        changes: list[MemoryChange],
        now: datetime,
    ) -> TurnMemoryWrites:
        """The items of a turn's memory changes, conditioned on the versions ``held`` (entry
        items by sort key) as the turn read them. A forget of an entry already gone or
        expired has nothing to do."""
        writes = TurnMemoryWrites(self._table, owner, [], {}, [], [])
        deltas: dict[str | None, int] = {}
        for change in changes:
            current = held.get(entry_sk(change.key, change.conversation_id))
            if change.entry is not None:
                stored, items = self.write(owner, change.entry, current, now, counted=False)
                writes.items.extend(items)
                writes.stored.append(stored)
                if current is None:
                    deltas[change.conversation_id] = deltas.get(change.conversation_id, 0) + 1
                continue
            if current is None or not is_active(current.entry(), now):
                writes.forgotten.append(change.key)
                continue
            writes.items.extend(self.removal(owner, current, Source.EXPLICIT, now, counted=False))
            writes.forgotten.append(change.key)
            deltas[change.conversation_id] = deltas.get(change.conversation_id, 0) - 1
        writes.moves = {
            scope: self.move(owner, scope, delta) for scope, delta in deltas.items() if delta
        }
        return writes

    def note(self, owner: str, entry: MemoryEntry, reason: str, now: datetime) -> dict[str, Any]:
        """A history record alone: a background job looked at the entry and left it, and
        says why."""
        put: dict[str, Any] = self._history_put(
            owner, entry, Action.KEPT, entry.value, entry.value, Source.EXTRACTED, now, reason
        )["Put"]
        return put

    def move(self, owner: str, conversation_id: str | None, delta: int) -> CountMove:
        key, attribute = counter(owner, conversation_id)
        return CountMove(key, attribute, delta, self.cap(conversation_id))

    def _history_put(
        self,
        owner: str,
        entry: MemoryEntry,
        action: Action,
        old_value: str | None,
        new_value: str | None,
        source: Source | None,
        now: datetime,
        reason: str | None = None,
    ) -> Any:
        record = HistoryRecord(
            key=entry.key,
            scope=entry.scope,
            conversation_id=entry.conversation_id,
            action=action,
            old_value=old_value,
            new_value=new_value,
            category=entry.category,
            source=source,
            reason=reason,
            at=clock.stamp(now),
        )
        item = HistoryItem.of(owner, record, new_id()).item()
        return {"Put": {"TableName": self._table, "Item": item}}
