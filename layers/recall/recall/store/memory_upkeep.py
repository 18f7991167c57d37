"""What the background jobs keep on a user's ``META`` item in the Memories table: the
gates of extraction and consolidation, claimed with conditional updates so two workers
never both run one, and the consolidation schedule.

A user and project is due for consolidation once a session starts (the turn's
transaction sets ``dueBucket = C#<hour>#<shard>`` and ``dueAt`` on ``META``), so the
hourly fan-out reads only the ``C#`` buckets of the ``byDue`` index. The worker then
claims the slot (which takes ``META`` out of the index), moves it to when the 24-hour gate
opens, or takes it out until the next session, so an item is read about once per session,
never once per hour forever.

A claim is taken before the work, so two workers never both run it; a run that fails
gives its slot back (``give_back_extraction``, ``give_back_consolidation``), so SQS's
redelivery of the job runs it again rather than finding the slot spent."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from botocore.exceptions import ClientError

from recall.domain import clock
from recall.errors import Conflict
from recall.retry import attempts
from recall.settings import Settings
from recall.store.due import due_items
from recall.store.dynamodb import (
    collided,
    dynamodb_client,
    from_item,
    to_value,
    translate,
)
from recall.store.keys import (
    CONSOLIDATION_BUCKET_PREFIX,
    consolidation_bucket,
    due_buckets,
    owner_key,
    owner_parts,
)
from recall.store.memory_items import (
    META_SK,
    PERSISTENT_COUNT,
    MetaItem,
    entry_place,
    meta_key,
)
from recall.store.memory_transactions import CountMove

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_SESSIONS = "sessionsSinceConsolidation"
# The stamp of a consolidation that gave its slot back part-way: its redo passes the memory
# gate, which the entries it retired before failing may have taken it under.
_UNFINISHED = "consolidationUnfinishedAt"


class DueEntry(NamedTuple):
    """An entry the expire job found due, by its place: user, project, key and thread."""

    user_id: str
    project_id: str
    key: str
    conversation_id: str | None


class ExtractionSlot(NamedTuple):
    """An extraction slot a run took: the stamp it set on ``META`` and the one it replaced
    (``None``: never extracted), to put back if the run fails."""

    taken_at: str
    replaced: str | None


class ConsolidationSlot(NamedTuple):
    """A consolidation slot a run took: its stamp, the stamp it replaced and the session
    count it reset, to put back if the run fails."""

    taken_at: str
    replaced: str | None
    sessions: int


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
        self._attempts = settings.memory_write_attempts
        self._backoff_seconds = settings.batch_retry_base_seconds

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
    ) -> ExtractionSlot | None:
        """Take this project's extraction slot if the last one is at least
        ``extract_cooldown_seconds`` old; of two workers racing, exactly one gets the slot.
        ``guard``, a ``ConditionCheck`` on the user's membership, joins the update: a user
        erased meanwhile gets ``None``, and no ``META`` item comes back for them.

        ``META`` is read first (one consistent ``GetItem``) and the new stamp is set only
        over the one read, so the slot knows exactly what it replaced: the guard makes the
        claim a transaction, which returns no old values."""
        owner = owner_key(user_id, project_id)
        last = self._meta(owner).last_extraction_at
        if last is not None and last > clock.stamp(now - self._extract_cooldown):
            return None
        taken = clock.stamp(now)
        values = {":now": to_value(taken)}
        if last is not None:
            values[":last"] = to_value(last)
        claimed = self._update(
            owner,
            "SET #last = :now",
            "attribute_not_exists(#last)" if last is None else "#last = :last",
            {"#last": "lastExtractionAt"},
            values,
            guard,
        )
        return ExtractionSlot(taken, last) if claimed is not None else None

    def give_back_extraction(self, user_id: str, project_id: str, slot: ExtractionSlot) -> bool:
        """Put back the stamp ``slot`` replaced, so the next delivery of a job that failed
        runs; ``False`` when the stamp is no longer this run's (another worker claimed
        since, or the user was erased), which is then left as it is."""
        values = {":taken": to_value(slot.taken_at)}
        if slot.replaced is None:
            update = "REMOVE #last"
        else:
            update = "SET #last = :replaced"
            values[":replaced"] = to_value(slot.replaced)
        given = self._update(
            owner_key(user_id, project_id),
            update,
            "#last = :taken",
            {"#last": "lastExtractionAt"},
            values,
        )
        return given is not None

    def claim_consolidation(
        self, user_id: str, project_id: str, now: datetime, *, active: int, expired: int
    ) -> ConsolidationSlot | None:
        """Take the consolidation slot when the settings' three ``consolidate_min_*`` gates
        pass, resetting the session count and leaving the schedule; of two workers racing,
        exactly one gets the slot. Otherwise nothing changes.

        ``active`` and ``expired`` count the persistent entries the caller read, unexpired
        and expired at ``now``; the memory gate counts only the unexpired ones. The counter
        on ``META`` also counts expired entries until the expire job deletes them, so the
        condition asks it for the gate plus the expired entries read: an entry deleted
        between the read and the claim counts against the gate too. (So does an expired one
        the expire job deletes meanwhile, which can refuse a slot at exactly the gate; the
        next session schedules it again.) Under the gate as read, only the redo of a
        consolidation that gave its slot back part-way is claimed: what it retired before
        failing may have taken the count under the gate.

        The update returns the item as it was, so the slot knows what it replaced."""
        taken = clock.stamp(now)
        names = {
            "#last": "lastConsolidationAt",
            "#sessions": _SESSIONS,
            "#dueBucket": "dueBucket",
            "#dueAt": "dueAt",
            "#unfinished": _UNFINISHED,
        }
        values = {
            ":now": to_value(taken),
            ":cutoff": to_value(clock.stamp(now - self._consolidate_gap)),
            ":zero": to_value(0),
            ":minSessions": to_value(self._consolidate_sessions),
        }
        if active < self._consolidate_memories:
            counted = "attribute_exists(#unfinished)"
        else:
            counted = "(#count >= :minCounted OR attribute_exists(#unfinished))"
            names["#count"] = PERSISTENT_COUNT
            values[":minCounted"] = to_value(self._consolidate_memories + expired)
        before = self._update(
            owner_key(user_id, project_id),
            "SET #last = :now, #sessions = :zero REMOVE #dueBucket, #dueAt, #unfinished",
            "(attribute_not_exists(#last) OR #last <= :cutoff)"
            f" AND #sessions >= :minSessions AND {counted}",
            names,
            values,
        )
        if before is None:
            return None
        meta = MetaItem.model_validate(before)
        return ConsolidationSlot(
            taken, meta.last_consolidation_at, meta.sessions_since_consolidation
        )

    def give_back_consolidation(
        self, user_id: str, project_id: str, slot: ConsolidationSlot
    ) -> bool:
        """Put the slot back as the claim found it, for the next delivery of a job that
        failed: the stamp it replaced, its sessions added back to any counted since (a
        session's own count stays), the schedule (due at the claim, unless a session
        scheduled it since) and the memory gate passed for the redo. ``False`` when the
        stamp is no longer this run's; then nothing changes."""
        owner = owner_key(user_id, project_id)
        sets = [
            "#unfinished = :taken",
            "#dueBucket = if_not_exists(#dueBucket, :bucket)",
            "#dueAt = if_not_exists(#dueAt, :taken)",
        ]
        values = {
            ":taken": to_value(slot.taken_at),
            ":bucket": to_value(consolidation_bucket(owner, slot.taken_at, self._shards)),
            ":sessions": to_value(slot.sessions),
        }
        removed = ""
        if slot.replaced is None:
            removed = " REMOVE #last"
        else:
            sets.append("#last = :replaced")
            values[":replaced"] = to_value(slot.replaced)
        given = self._update(
            owner,
            f"SET {', '.join(sets)} ADD #sessions :sessions{removed}",
            "#last = :taken",
            {
                "#last": "lastConsolidationAt",
                "#sessions": _SESSIONS,
                "#dueBucket": "dueBucket",
                "#dueAt": "dueAt",
                "#unfinished": _UNFINISHED,
            },
            values,
        )
        return given is not None

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
        moved = self._update(
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
        return moved is not None

    def unschedule_consolidation(self, user_id: str, project_id: str, seen_due_at: str) -> bool:
        """Leave the schedule until the next session, unless a session started meanwhile."""
        left = self._update(
            owner_key(user_id, project_id),
            "REMOVE #dueBucket, #dueAt",
            "#dueAt = :seen",
            {"#dueBucket": "dueBucket", "#dueAt": "dueAt"},
            {":seen": to_value(seen_due_at)},
        )
        return left is not None

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

    def _meta(self, owner: str) -> MetaItem:
        item = self.client.get_item(
            TableName=self._table, Key=meta_key(owner), ConsistentRead=True
        ).get("Item")
        return MetaItem.model_validate(from_item(item) if item else {})

    def _update(
        self,
        owner: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        guard: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """A conditional update of ``META``: ``None`` when the condition (or ``guard``, a
        ``ConditionCheck`` sent with it) did not hold, else the item's attributes as they
        were (empty with ``guard``: a transaction returns none). An update that only met
        another transaction on ``META`` (a turn's, which writes it often) is sent again,
        and one that keeps meeting them is raised: read as a failed condition, it would
        spend or keep a slot the gates never refused."""
        request: Any = {
            "TableName": self._table,
            "Key": meta_key(owner),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        for attempt in attempts(self._attempts, self._backoff_seconds):
            try:
                if guard is None:
                    reply = self.client.update_item(**request, ReturnValues="ALL_OLD")
                    return from_item(reply.get("Attributes", {}))
                items: Any = [{"Update": request}, {"ConditionCheck": guard}]
                self.client.transact_write_items(TransactItems=items)
                return {}
            except ClientError as exc:
                if collided(exc):
                    if attempt + 1 < self._attempts:
                        continue
                    raise translate(exc) from exc
                error = translate(exc)
                if isinstance(error, Conflict):
                    return None
                raise error from exc
        raise AssertionError("unreachable: the last attempt returns or raises")
