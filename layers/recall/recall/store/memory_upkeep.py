"""What the background jobs keep on a user's ``META`` item in the Memories table: the
gates of extraction and consolidation, claimed with conditional updates so two workers
never both run one, and the consolidation schedule.

A user and project is due for consolidation once a session starts (the turn's
transaction sets ``dueBucket = C#<hour>#<shard>`` and ``dueAt`` on ``META``), so the
hourly fan-out reads only the ``C#`` buckets of the ``byDue`` index. The worker then
claims the slot (which takes ``META`` out of the index), moves it to when the 24-hour gate
opens, or takes it out until the next session, so an item is read about once per session,
never once per hour forever."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from botocore.exceptions import ClientError

from recall.domain import clock
from recall.errors import Conflict
from recall.settings import Settings
from recall.store.due import due_items
from recall.store.dynamodb import dynamodb_client, from_item, to_value, translate
from recall.store.keys import (
    CONSOLIDATION_BUCKET_PREFIX,
    consolidation_bucket,
    due_buckets,
    owner_key,
    owner_parts,
)
from recall.store.memory_items import META_SK, PERSISTENT_COUNT, entry_place, meta_key
from recall.store.memory_transactions import CountMove

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_SESSIONS = "sessionsSinceConsolidation"


class DueEntry(NamedTuple):
    """An entry the expire job found due, by its place: user, project, key and thread."""

    user_id: str
    project_id: str
    key: str
    conversation_id: str | None


class MemoryUpkeep:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.memories_table
        self._client = client
        self._shards = settings.due_shards
        self._lookback_hours = settings.maintenance_lookback_hours
        self._extract_cooldown = timedelta(seconds=settings.extract_cooldown_seconds)
        self._consolidate_gap = timedelta(seconds=settings.consolidate_min_seconds)
        self._consolidate_sessions = settings.consolidate_min_sessions
        self._consolidate_memories = settings.consolidate_min_memories

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def session_started_request(
        self, user_id: str, project_id: str, at: str, persistent: CountMove | None = None
    ) -> dict[str, Any]:
        """One more session since the last consolidation, for the turn's own transaction;
        it also puts the user and project in the consolidation schedule. The turn's move of
        the persistent counter, which lives on the same item, joins this one update."""
        owner = owner_key(user_id, project_id)
        add = "#sessions :one"
        names = {"#sessions": _SESSIONS, "#dueBucket": "dueBucket", "#dueAt": "dueAt"}
        values = {
            ":one": to_value(1),
            ":bucket": to_value(consolidation_bucket(owner, at, self._shards)),
            ":at": to_value(at),
        }
        condition = None
        if persistent is not None:
            clause, condition, moved = persistent.clause("#count", ":delta")
            add += f", {clause}"
            names["#count"] = persistent.attribute
            values.update(moved)
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": meta_key(owner),
            "UpdateExpression": f"ADD {add} SET #dueBucket = :bucket, #dueAt = :at",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if condition:
            request["ConditionExpression"] = condition
        return request

    def claim_extraction(
        self,
        user_id: str,
        project_id: str,
        now: datetime,
        guard: dict[str, Any] | None = None,
    ) -> bool:
        """Take this project's extraction slot if the last one is at least
        ``extract_cooldown_seconds`` old; of two workers racing, exactly one gets ``True``.
        ``guard``, a ``ConditionCheck`` on the user's membership, joins the update: a user
        erased meanwhile gets ``False``, and no ``META`` item comes back for them."""
        return self._update(
            owner_key(user_id, project_id),
            "SET #last = :now",
            "attribute_not_exists(#last) OR #last <= :cutoff",
            {"#last": "lastExtractionAt"},
            {
                ":now": to_value(clock.stamp(now)),
                ":cutoff": to_value(clock.stamp(now - self._extract_cooldown)),
            },
            guard,
        )

    def claim_consolidation(
        self, user_id: str, project_id: str, now: datetime, *, active: int, expired: int
    ) -> bool:
        """Take the consolidation slot when the settings' three ``consolidate_min_*`` gates
        pass, resetting the session count and leaving the schedule; of two workers racing,
        exactly one gets ``True``. Otherwise nothing changes.

        ``active`` and ``expired`` count the persistent entries the caller read, unexpired
        and expired at ``now``; the memory gate counts only the unexpired ones. The counter
        on ``META`` also counts expired entries until the expire job deletes them, so the
        condition asks it for the gate plus the expired entries read: an entry deleted
        between the read and the claim counts against the gate too. (So does an expired one
        the expire job deletes meanwhile, which can refuse a slot at exactly the gate; the
        next session schedules it again.)"""
        if active < self._consolidate_memories:
            return False
        return self._update(
            owner_key(user_id, project_id),
            "SET #last = :now, #sessions = :zero REMOVE #dueBucket, #dueAt",
            "(attribute_not_exists(#last) OR #last <= :cutoff)"
            " AND #sessions >= :minSessions AND #count >= :minCounted",
            {
                "#last": "lastConsolidationAt",
                "#sessions": _SESSIONS,
                "#count": PERSISTENT_COUNT,
                "#dueBucket": "dueBucket",
                "#dueAt": "dueAt",
            },
            {
                ":now": to_value(clock.stamp(now)),
                ":cutoff": to_value(clock.stamp(now - self._consolidate_gap)),
                ":zero": to_value(0),
                ":minSessions": to_value(self._consolidate_sessions),
                ":minCounted": to_value(self._consolidate_memories + expired),
            },
        )

    def consolidation_opens_at(self, last_consolidation_at: str | None) -> datetime | None:
        """When the 24-hour gate opens again after the last consolidation."""
        if last_consolidation_at is None:
            return None
        return clock.parse(last_consolidation_at) + self._consolidate_gap

    def reschedule_consolidation(
        self, user_id: str, project_id: str, seen_due_at: str, due_at: datetime
    ) -> bool:
        """Move the user and project to when its time gate opens, unless a session moved
        it meanwhile."""
        owner = owner_key(user_id, project_id)
        at = clock.stamp(due_at)
        return self._update(
            owner,
            "SET #dueBucket = :bucket, #dueAt = :at",
            "#dueAt = :seen",
            {"#dueBucket": "dueBucket", "#dueAt": "dueAt"},
            {
                ":bucket": to_value(consolidation_bucket(owner, at, self._shards)),
                ":at": to_value(at),
                ":seen": to_value(seen_due_at),
            },
        )

    def unschedule_consolidation(self, user_id: str, project_id: str, seen_due_at: str) -> bool:
        """Leave the schedule until the next session, unless a session started meanwhile."""
        return self._update(
            owner_key(user_id, project_id),
            "REMOVE #dueBucket, #dueAt",
            "#dueAt = :seen",
            {"#dueBucket": "dueBucket", "#dueAt": "dueAt"},
            {":seen": to_value(seen_due_at)},
        )

    def due_consolidations(self, now: datetime) -> Iterator[tuple[str, str]]:
        """``(user_id, project_id)`` of everyone due for consolidation, from their buckets."""
        buckets = due_buckets(now, self._lookback_hours, self._shards, CONSOLIDATION_BUCKET_PREFIX)
        for item in due_items(self.client, self._table, buckets, now):
            keys = from_item({"owner": item["owner"], "sk": item["sk"]})
            if keys["sk"] == META_SK:
                yield owner_parts(keys["owner"])

    def due_expiries(self, now: datetime) -> Iterator[DueEntry]:
        """Every entry whose expiry has passed, from the expiry buckets."""
        buckets = due_buckets(now, self._lookback_hours, self._shards)
        for item in due_items(self.client, self._table, buckets, now):
            keys = from_item({"owner": item["owner"], "sk": item["sk"]})
            place = entry_place(keys["sk"])
            if place is not None:
                yield DueEntry(*owner_parts(keys["owner"]), *place)

    def _update(
        self,
        owner: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        guard: dict[str, Any] | None = None,
    ) -> bool:
        """A conditional update of ``META``: ``False`` when the condition (or ``guard``, a
        ``ConditionCheck`` sent with it) did not hold."""
        request: Any = {
            "TableName": self._table,
            "Key": meta_key(owner),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        try:
            if guard is None:
                self.client.update_item(**request)
            else:
                items: Any = [{"Update": request}, {"ConditionCheck": guard}]
                self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            error = translate(exc)
            if isinstance(error, Conflict):
                return False
            raise error from exc
        return True
