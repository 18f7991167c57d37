"""The Memories table, under ``owner = <userId>#<projectId>``: persistent entries
(``M#<key>``), thread entries (``T#<conversationId>#<key>``), the ``META`` counters and
each entry's change history (``H#<entry sort key>#<ulid>``). Keys never contain ``#``,
so every prefix below is unambiguous.

Counting. ``META.persistentCount`` counts persistent entry items and each thread's counter
item (``T#<conversationId>#``, the empty key no entry can have, so deleting the thread's
prefix deletes it too) counts that thread's. A create moves the counter in the same
transaction as the entry, under a condition that keeps it below the cap; an update reuses
its slot. An expired entry still holds its slot until it is deleted, so when a write hits
the cap the store first expires what is past its time (and repairs a counter that DynamoDB's
TTL left behind), then tries once more: a user never meets a cap made of entries they
cannot see.

Writing over an expired entry is a create (new ``createdAt``), recorded as ``expired``
then ``created`` in its history. Background writes may replace an expired explicit entry:
it is gone for every reader already.

Expiry. An entry with ``expiresAt`` carries ``dueAt`` (= expiresAt) and ``dueBucket``
(``<expiresAt hour>#<shard>``) for the sparse ``byDue`` index the expire job reads, and a
``ttl`` some hours later, as a backstop for that job.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain import clock
from recall.domain.ids import new_id
from recall.domain.memory import (
    BACKGROUND_SOURCES,
    Action,
    Category,
    HistoryRecord,
    MemoryEntry,
    MemoryMeta,
    Scope,
    Source,
    is_active,
    sort_for_listing,
)
from recall.errors import Conflict
from recall.observability import logger
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    batch_delete,
    cancellation_codes,
    dynamodb_client,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import due_bucket, owner_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PERSISTENT_PREFIX = "M#"
THREAD_PREFIX = "T#"
HISTORY_PREFIX = "H#"
META_SK = "META"
BY_DUE = "byDue"
PERSISTENT_COUNT = "persistentCount"
THREAD_COUNT = "entryCount"
_FAILED = "ConditionalCheckFailed"


def thread_prefix(conversation_id: str) -> str:
    return f"{THREAD_PREFIX}{conversation_id}#"


def entry_sk(key: str, conversation_id: str | None) -> str:
    """``conversation_id`` names a thread entry; ``None`` a persistent one."""
    return f"{thread_prefix(conversation_id)}{key}" if conversation_id else PERSISTENT_PREFIX + key


def history_prefix(key: str, conversation_id: str | None) -> str:
    return f"{HISTORY_PREFIX}{entry_sk(key, conversation_id)}#"


def entry_from(item: Item) -> MemoryEntry:
    values = from_item(item)
    return MemoryEntry(
        key=values["key"],
        value=values["value"],
        category=Category(values["category"]),
        scope=Scope(values["scope"]),
        conversation_id=values.get("conversationId"),
        source=Source(values["source"]),
        confidence=values.get("confidence", 1.0),
        created_at=values["createdAt"],
        updated_at=values["updatedAt"],
        expires_at=values.get("expiresAt"),
    )


def _history_from(item: Item) -> HistoryRecord:
    values = from_item(item)
    return HistoryRecord(
        key=values["key"],
        scope=Scope(values["scope"]),
        conversation_id=values.get("conversationId"),
        action=Action(values["action"]),
        old_value=values.get("oldValue"),
        new_value=values.get("newValue"),
        category=Category(values["category"]) if values.get("category") else None,
        source=Source(values["source"]) if values.get("source") else None,
        at=values["at"],
    )


def _is_entry(item: Item) -> bool:
    """Entry items, not a thread's counter item that shares their prefix."""
    return "key" in item


class MemoryStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.memories_table
        self._client = client
        self._batch_size = settings.delete_batch_size
        self._cap = settings.memory_cap
        self._thread_cap = settings.thread_memory_cap
        self._attempts = settings.memory_write_attempts
        self._shards = settings.due_shards
        self._ttl_grace = timedelta(hours=settings.memory_ttl_grace_hours)

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    # Reading

    def persistent_request(self, user_id: str, project_id: str) -> dict[str, Any]:
        """Query kwargs for a caller's persistent entries (50 at most: one page)."""
        return self._prefix_query(owner_key(user_id, project_id), PERSISTENT_PREFIX)

    def thread_request(self, user_id: str, project_id: str, conversation_id: str) -> dict[str, Any]:
        """Query kwargs for one thread's entries (with its counter item, which
        ``entries_from`` skips)."""
        return self._prefix_query(owner_key(user_id, project_id), thread_prefix(conversation_id))

    @staticmethod
    def entries_from(items: list[Item], now: datetime | None = None) -> list[MemoryEntry]:
        """Entries of a query's items in listing order; expired ones left out when ``now``
        is given."""
        entries = [entry_from(item) for item in items if _is_entry(item)]
        return sort_for_listing(e for e in entries if now is None or is_active(e, now))

    def active(
        self, user_id: str, project_id: str, conversation_id: str | None, now: datetime
    ) -> tuple[list[MemoryEntry], list[MemoryEntry]]:
        """The caller's unexpired persistent entries and, with a thread, that thread's;
        expiry is judged here, whether or not a cleanup has run."""
        persistent = self.entries_from(self._all(self.persistent_request(user_id, project_id)), now)
        if conversation_id is None:
            return persistent, []
        thread = self.entries_from(
            self._all(self.thread_request(user_id, project_id, conversation_id)), now
        )
        return persistent, thread

    def get(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None, now: datetime
    ) -> MemoryEntry | None:
        """One active entry; an expired one reads as absent."""
        item = self._current(owner_key(user_id, project_id), entry_sk(key, conversation_id))
        entry = entry_from(item) if item else None
        return entry if entry is not None and is_active(entry, now) else None

    def history(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None
    ) -> list[HistoryRecord]:
        """Every recorded change of one entry, oldest first (it outlives the entry)."""
        query = self._prefix_query(
            owner_key(user_id, project_id), history_prefix(key, conversation_id)
        )
        return [_history_from(item) for item in self._all(query)]

    def meta(self, user_id: str, project_id: str) -> MemoryMeta:
        item = self.client.get_item(
            TableName=self._table,
            Key=self._meta_key(owner_key(user_id, project_id)),
            ConsistentRead=True,
        ).get("Item")
        values = from_item(item) if item else {}
        return MemoryMeta(
            persistent_count=values.get(PERSISTENT_COUNT, 0),
            last_extraction_at=values.get("lastExtractionAt"),
            last_consolidation_at=values.get("lastConsolidationAt"),
            sessions_since_consolidation=values.get("sessionsSinceConsolidation", 0),
        )

    # Writing

    def write(
        self, user_id: str, project_id: str, entry: MemoryEntry, now: datetime
    ) -> tuple[MemoryEntry, bool] | None:
        """Create or update one entry: ``(stored entry, created)``. A background write
        (extracted, consolidated) that meets an active explicit entry, or the cap, is
        dropped and logged (``None``); an explicit write over the cap is a Conflict."""
        owner = owner_key(user_id, project_id)
        sk = entry_sk(entry.key, entry.conversation_id)
        background = entry.source in BACKGROUND_SOURCES
        reclaimed = False
        for _ in range(self._attempts):
            current = self._current(owner, sk)
            stored, created, request = self._write_request(owner, sk, entry, current, now)
            try:
                self.client.transact_write_items(TransactItems=request)
            except ClientError as exc:
                codes = cancellation_codes(exc)
                if created and len(codes) > 1 and codes[1] == _FAILED:
                    if not reclaimed:
                        reclaimed = True
                        if self._reclaim(owner, entry.conversation_id, now):
                            continue
                    self._over_cap(entry, background, exc)
                    return None
                if codes and codes[0] == _FAILED:
                    if background and self._explicit_holds(owner, sk, now):
                        logger.info(
                            "background memory write skipped: explicit entry holds the key",
                            extra={"key": entry.key, "source": entry.source},
                        )
                        return None
                    continue
                error = translate(exc)
                if isinstance(error, Conflict):
                    continue
                raise error from exc
            return stored, created
        raise Conflict("The memory entry changed too often meanwhile; try again.")

    def delete(
        self,
        user_id: str,
        project_id: str,
        key: str,
        conversation_id: str | None,
        source: Source,
        now: datetime,
    ) -> MemoryEntry | None:
        """Delete one active entry with its history record; ``None`` when there is none. A
        background delete never removes an explicit entry (the condition says so)."""
        owner = owner_key(user_id, project_id)
        sk = entry_sk(key, conversation_id)
        background = source in BACKGROUND_SOURCES
        for _ in range(self._attempts):
            current = self._current(owner, sk)
            if current is None or not is_active(entry_from(current), now):
                return None
            previous = entry_from(current)
            condition = "#version = :version"
            values: dict[str, Any] = {":version": current["version"]}
            if background:
                condition += " AND #source <> :explicit"
                values[":explicit"] = to_value(Source.EXPLICIT.value)
            request: list[Any] = [
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": to_item({"owner": owner, "sk": sk}),
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": {
                            "#version": "version",
                            **({"#source": "source"} if background else {}),
                        },
                        "ExpressionAttributeValues": values,
                    }
                },
                self._count(owner, previous.conversation_id, -1),
                self._history_put(
                    owner, previous, Action.DELETED, previous.value, None, source, now
                ),
            ]
            try:
                self.client.transact_write_items(TransactItems=request)
            except ClientError as exc:
                codes = cancellation_codes(exc)
                if codes and codes[0] == _FAILED:
                    if background and self._explicit_holds(owner, sk, now):
                        return None
                    continue
                error = translate(exc)
                if isinstance(error, Conflict):
                    continue
                raise error from exc
            return previous
        raise Conflict("The memory entry changed too often meanwhile; try again.")

    def expire(
        self, user_id: str, project_id: str, key: str, conversation_id: str | None, now: datetime
    ) -> bool:
        """Delete an entry past its expiry, recording it; ``False`` if it is absent, still
        active, or was renewed meanwhile. The expire job calls this for what ``byDue`` lists."""
        return self._expire(owner_key(user_id, project_id), entry_sk(key, conversation_id), now)

    def delete_thread(self, user_id: str, project_id: str, conversation_id: str) -> int:
        """Delete a thread's own entries and their history (the thread is being deleted)."""
        owner = owner_key(user_id, project_id)
        deleted = 0
        for prefix in (
            thread_prefix(conversation_id),
            HISTORY_PREFIX + thread_prefix(conversation_id),
        ):
            query: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "#owner = :owner AND begins_with(#sk, :prefix)",
                "ExpressionAttributeNames": {"#owner": "owner", "#sk": "sk"},
                "ExpressionAttributeValues": {
                    ":owner": to_value(owner),
                    ":prefix": to_value(prefix),
                },
                "ProjectionExpression": "#owner, #sk",
            }
            while True:
                page = self.client.query(**query)
                deleted += batch_delete(self.client, self._table, page["Items"], self._batch_size)
                if "LastEvaluatedKey" not in page:
                    break
                query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return deleted

    # Counters for the background gates

    def claim_extraction(
        self, user_id: str, project_id: str, now: datetime, cooldown: timedelta
    ) -> bool:
        """Take this project's extraction slot if the last one is at least ``cooldown`` old;
        of two workers racing, exactly one gets ``True``."""
        return self._claim(
            owner_key(user_id, project_id),
            "SET #last = :now",
            "attribute_not_exists(#last) OR #last <= :cutoff",
            {"#last": "lastExtractionAt"},
            {":now": to_value(clock.stamp(now)), ":cutoff": to_value(clock.stamp(now - cooldown))},
        )

    def claim_consolidation(
        self,
        user_id: str,
        project_id: str,
        now: datetime,
        min_interval: timedelta,
        min_sessions: int,
        min_memories: int,
    ) -> bool:
        """Take the consolidation slot when all three gates pass, resetting the session
        count; of two workers racing, exactly one gets ``True``."""
        return self._claim(
            owner_key(user_id, project_id),
            "SET #last = :now, #sessions = :zero",
            "(attribute_not_exists(#last) OR #last <= :cutoff)"
            " AND #sessions >= :minSessions AND #count >= :minMemories",
            {
                "#last": "lastConsolidationAt",
                "#sessions": "sessionsSinceConsolidation",
                "#count": PERSISTENT_COUNT,
            },
            {
                ":now": to_value(clock.stamp(now)),
                ":cutoff": to_value(clock.stamp(now - min_interval)),
                ":zero": to_value(0),
                ":minSessions": to_value(min_sessions),
                ":minMemories": to_value(min_memories),
            },
        )

    def session_started_request(self, user_id: str, project_id: str) -> dict[str, Any]:
        """One more session since the last consolidation, for the turn's own transaction."""
        return {
            "TableName": self._table,
            "Key": self._meta_key(owner_key(user_id, project_id)),
            "UpdateExpression": "ADD #sessions :one",
            "ExpressionAttributeNames": {"#sessions": "sessionsSinceConsolidation"},
            "ExpressionAttributeValues": {":one": to_value(1)},
        }

    def count_session(self, user_id: str, project_id: str) -> int:
        """One more session since the last consolidation; the new count."""
        result = self.client.update_item(
            **self.session_started_request(user_id, project_id), ReturnValues="UPDATED_NEW"
        )
        return int(from_item(result["Attributes"])["sessionsSinceConsolidation"])

    # Internals

    def _prefix_query(self, owner: str, prefix: str) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#owner": "owner", "#sk": "sk"},
            "ExpressionAttributeValues": {
                ":owner": to_value(owner),
                ":prefix": to_value(prefix),
            },
            "ConsistentRead": True,
        }

    def _all(self, query: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        request = dict(query)
        while True:
            page = self.client.query(**request)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _current(self, owner: str, sk: str) -> Item | None:
        return self.client.get_item(
            TableName=self._table, Key=to_item({"owner": owner, "sk": sk}), ConsistentRead=True
        ).get("Item")

    def _explicit_holds(self, owner: str, sk: str, now: datetime) -> bool:
        item = self._current(owner, sk)
        if item is None:
            return False
        entry = entry_from(item)
        return entry.source == Source.EXPLICIT and is_active(entry, now)

    def _meta_key(self, owner: str) -> Item:
        return to_item({"owner": owner, "sk": META_SK})

    def _counter(self, owner: str, conversation_id: str | None) -> tuple[Item, str, int]:
        """The item, attribute and cap that count a scope's entries."""
        if conversation_id is None:
            return self._meta_key(owner), PERSISTENT_COUNT, self._cap
        return (
            to_item({"owner": owner, "sk": thread_prefix(conversation_id)}),
            THREAD_COUNT,
            self._thread_cap,
        )

    def _count(self, owner: str, conversation_id: str | None, delta: int) -> Any:
        """Move a scope's counter; a step up only while it is below the cap."""
        key, attribute, cap = self._counter(owner, conversation_id)
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": key,
            "UpdateExpression": "ADD #count :delta",
            "ExpressionAttributeNames": {"#count": attribute},
            "ExpressionAttributeValues": {":delta": to_value(delta)},
        }
        if delta > 0:
            update["ConditionExpression"] = "attribute_not_exists(#count) OR #count < :cap"
            update["ExpressionAttributeValues"][":cap"] = to_value(cap)
        return {"Update": update}

    def _entry_item(self, owner: str, sk: str, entry: MemoryEntry, version: int) -> Item:
        values: dict[str, Any] = {
            "owner": owner,
            "sk": sk,
            "key": entry.key,
            "value": entry.value,
            "category": entry.category.value,
            "scope": entry.scope.value,
            "conversationId": entry.conversation_id,
            "source": entry.source.value,
            "confidence": entry.confidence,
            "createdAt": entry.created_at,
            "updatedAt": entry.updated_at,
            "version": version,
        }
        if entry.expires_at is not None:
            values["expiresAt"] = entry.expires_at
            values["dueAt"] = entry.expires_at
            values["dueBucket"] = due_bucket(owner, entry.expires_at, self._shards)
            values["ttl"] = int((clock.parse(entry.expires_at) + self._ttl_grace).timestamp())
        return to_item(values)

    def _history_put(
        self,
        owner: str,
        entry: MemoryEntry,
        action: Action,
        old_value: str | None,
        new_value: str | None,
        source: Source | None,
        now: datetime,
    ) -> Any:
        item = to_item(
            {
                "owner": owner,
                "sk": history_prefix(entry.key, entry.conversation_id) + new_id(),
                "key": entry.key,
                "scope": entry.scope.value,
                "conversationId": entry.conversation_id,
                "action": action.value,
                "oldValue": old_value,
                "newValue": new_value,
                "category": entry.category.value,
                "source": source.value if source else None,
                "at": clock.stamp(now),
            }
        )
        return {"Put": {"TableName": self._table, "Item": item}}

    def _write_request(
        self, owner: str, sk: str, entry: MemoryEntry, current: Item | None, now: datetime
    ) -> tuple[MemoryEntry, bool, list[Any]]:
        """The one transaction of a write: the entry under its condition, the counter when
        it takes a new slot, and its history records."""
        previous = entry_from(current) if current else None
        live = previous is not None and is_active(previous, now)
        at = clock.stamp(now)
        stored = entry.model_copy(
            update={
                "created_at": previous.created_at if previous and live else at,
                "updated_at": at,
            }
        )
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if current is None:
            condition = "attribute_not_exists(#sk)"
            names["#sk"] = "sk"
            version = 1
        else:
            condition = "#version = :version"
            names["#version"] = "version"
            values[":version"] = current["version"]
            version = int(from_item(current)["version"]) + 1
        if entry.source in BACKGROUND_SOURCES:
            condition = (
                f"({condition}) AND (attribute_not_exists(#sk) OR #source <> :explicit"
                " OR #expiresAt <= :now)"
            )
            names.update({"#sk": "sk", "#source": "source", "#expiresAt": "expiresAt"})
            values.update({":explicit": to_value(Source.EXPLICIT.value), ":now": to_value(at)})
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": self._entry_item(owner, sk, stored, version),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            put["ExpressionAttributeValues"] = values
        request: list[Any] = [{"Put": put}]
        if current is None:
            request.append(self._count(owner, entry.conversation_id, 1))
        if previous is not None and not live:
            request.append(
                self._history_put(owner, previous, Action.EXPIRED, previous.value, None, None, now)
            )
        if live and previous is not None:
            request.append(
                self._history_put(
                    owner, stored, Action.UPDATED, previous.value, stored.value, entry.source, now
                )
            )
        else:
            request.append(
                self._history_put(
                    owner, stored, Action.CREATED, None, stored.value, entry.source, now
                )
            )
        return stored, current is None, request

    def _over_cap(self, entry: MemoryEntry, background: bool, exc: ClientError) -> None:
        """An explicit write over the cap is the caller's to resolve; a background one is
        dropped, and said so in the log."""
        cap = self._cap if entry.conversation_id is None else self._thread_cap
        where = "this project" if entry.conversation_id is None else "this conversation"
        if not background:
            raise Conflict(
                f"Memory is full: {where} already holds {cap} {entry.scope} entries. Update or "
                f"delete one before adding {entry.key!r}."
            ) from exc
        logger.warning(
            "background memory write dropped: cap reached",
            extra={"key": entry.key, "source": entry.source, "scope": entry.scope, "cap": cap},
        )

    def _expire(self, owner: str, sk: str, now: datetime) -> bool:
        current = self._current(owner, sk)
        if current is None:
            return False
        entry = entry_from(current)
        if is_active(entry, now):
            return False
        request: list[Any] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": to_item({"owner": owner, "sk": sk}),
                    "ConditionExpression": "#version = :version AND #expiresAt <= :now",
                    "ExpressionAttributeNames": {"#version": "version", "#expiresAt": "expiresAt"},
                    "ExpressionAttributeValues": {
                        ":version": current["version"],
                        ":now": to_value(clock.stamp(now)),
                    },
                }
            },
            self._count(owner, entry.conversation_id, -1),
            self._history_put(owner, entry, Action.EXPIRED, entry.value, None, None, now),
        ]
        try:
            self.client.transact_write_items(TransactItems=request)
        except ClientError as exc:
            error = translate(exc)
            if isinstance(error, Conflict):
                return False
            raise error from exc
        return True

    def _reclaim(self, owner: str, conversation_id: str | None, now: datetime) -> bool:
        """Free the slots of expired entries, then set the counter to the number of entry
        items if it drifted (TTL deletes bypass it). True when a slot may have opened."""
        prefix = PERSISTENT_PREFIX if conversation_id is None else thread_prefix(conversation_id)
        freed = 0
        for item in self._all(self._prefix_query(owner, prefix)):
            if _is_entry(item) and not is_active(entry_from(item), now):
                freed += self._expire(owner, from_item({"sk": item["sk"]})["sk"], now)
        key, attribute, _ = self._counter(owner, conversation_id)
        counter = self.client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        seen = from_item(counter.get("Item", {})).get(attribute)
        actual = sum(1 for item in self._all(self._prefix_query(owner, prefix)) if _is_entry(item))
        if seen is None or seen == actual:
            return freed > 0
        try:
            self.client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET #count = :actual",
                ConditionExpression="#count = :seen",
                ExpressionAttributeNames={"#count": attribute},
                ExpressionAttributeValues={":actual": to_value(actual), ":seen": to_value(seen)},
            )
        except ClientError as exc:
            error = translate(exc)
            if isinstance(error, Conflict):
                return freed > 0
            raise error from exc
        logger.warning(
            "memory counter repaired", extra={"attribute": attribute, "was": seen, "now": actual}
        )
        return True

    def _claim(
        self,
        owner: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> bool:
        try:
            self.client.update_item(
                TableName=self._table,
                Key=self._meta_key(owner),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            error = translate(exc)
            if isinstance(error, Conflict):
                return False
            raise error from exc
        return True
