"""The Usage table: what members and background jobs spend on the model.

A member's counters sit under their own ``owner = <userId>#<projectId>``: one item a
month (``period = M#<YYYY-MM>``) holding the month's counters and the current day's, so a
turn writes one small item, and one item per finished day (``D#<YYYY-MM-DD>``), written
by the first turn of the next day in that month. The last day a month item holds stays on
it. Background jobs count per project under ``owner = <projectId>`` (no ``#``, so never a
member's): ``M#<month>#<job>`` and ``D#<day>#<job>``. Items expire ``USAGE_KEPT_DAYS``
after their period.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain.conversations import ActiveThread
from recall.domain.usage import Counts, MemberUsage, day_of, month_of
from recall.errors import Conflict
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    StoredItem,
    batch_get,
    delete_found,
    dynamodb_client,
    error_code,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import SEPARATOR, owner_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

OWNER = "owner"
PERIOD = "period"
MONTH = "M#"
DAY = "D#"
EXPIRES = "expiresAt"
_COUNTERS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "turns": "turns",
    "toolRounds": "tool_rounds",
}
_DAY_PREFIX = "day"
ACTIVE = "active"
VERSION = "version"


class ActiveItem(StoredItem, ActiveThread):
    """The active thread as the month item holds it, in ``active``."""


def active_value(active: ActiveThread) -> Any:
    return {"M": ActiveItem.model_validate(active.model_dump()).item()}


def active_from(values: dict[str, Any]) -> ActiveThread | None:
    kept = values.get(ACTIVE)
    return ActiveItem.model_validate(kept) if kept else None


def _version_condition(version: int) -> str:
    """An item saved before versions were kept has none: it reads as 0."""
    if version == 0:
        return "(#version = :version OR attribute_not_exists(#version))"
    return "#version = :version"


def _day_name(attribute: str) -> str:
    return _DAY_PREFIX + attribute[0].upper() + attribute[1:]


def counts_from(values: dict[str, Any], day: bool = False) -> Counts:
    """The month's counters of an item, or with ``day`` the day's (``dayInputTokens``…)."""
    name = _day_name if day else (lambda attribute: attribute)
    return Counts(
        **{field: int(values.get(name(attribute), 0)) for attribute, field in _COUNTERS.items()},
        models=frozenset(values.get(name("models"), set())),
    )


def _values(counts: Counts) -> dict[str, Any]:
    return {
        f":v{n}": to_value(getattr(counts, field)) for n, field in enumerate(_COUNTERS.values())
    }


# The expression parts that add a count (``:v<n>``) to the month's (``#c<n>``) or the day's
# (``#d<n>``) counters, or set the day's to it: the same for every write, built once.
_MONTH_NAMES = {f"#c{n}": attribute for n, attribute in enumerate(_COUNTERS)}
_DAY_NAMES = {f"#d{n}": _day_name(attribute) for n, attribute in enumerate(_COUNTERS)}
_ADD_MONTH = ", ".join(f"{name} :v{n}" for n, name in enumerate(_MONTH_NAMES))
_ADD_DAY = ", ".join(f"{name} :v{n}" for n, name in enumerate(_DAY_NAMES))
_SET_DAY = ", ".join(f"{name} = :v{n}" for n, name in enumerate(_DAY_NAMES))


class UsageStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.usage_table
        self._kept = timedelta(days=settings.usage_kept_days)
        self._attempts = settings.turn_retry_max
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def month_key(self, user_id: str, project_id: str, month: str) -> Item:
        return to_item({OWNER: owner_key(user_id, project_id), PERIOD: MONTH + month})

    def latest_request(self, user_id: str, project_id: str) -> dict[str, Any]:
        """The query of the member's latest month item: this month's when they have one,
        else the one that holds their active thread, however old. Strongly consistent: a
        turn whose count lost a race reads what won."""
        return {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner AND begins_with(#period, :month)",
            "ExpressionAttributeNames": {"#owner": OWNER, "#period": PERIOD},
            "ExpressionAttributeValues": {
                ":owner": to_value(owner_key(user_id, project_id)),
                ":month": to_value(MONTH),
            },
            "ScanIndexForward": False,
            "Limit": 1,
            "ConsistentRead": True,
        }

    def member_usage(self, found: list[Item], month: str) -> MemberUsage:
        """The member's counters for ``month`` and their active thread, from what
        ``latest_request`` found."""
        if not found:
            return MemberUsage(month=month)
        values = from_item(found[0])
        latest = str(values[PERIOD]).removeprefix(MONTH)
        held = MemberUsage(
            month=month,
            latest_month=latest,
            version=int(values.get(VERSION, 0)),
            active=active_from(values),
        )
        if not held.exists:
            return held
        return replace(
            held,
            month_counts=counts_from(values),
            day=values.get("day"),
            day_counts=counts_from(values, day=True),
        )

    def get(self, user_id: str, project_id: str, now: datetime) -> MemberUsage:
        found = self.client.query(**self.latest_request(user_id, project_id))["Items"]
        return self.member_usage(found, month_of(now))

    def active(self, user_id: str, project_id: str, now: datetime) -> ActiveThread | None:
        """The thread the member last talked in, as its last turns left it."""
        return self.get(user_id, project_id, now).active

    def forget(self, user_id: str, project_id: str, conversation_id: str) -> None:
        """A deleted thread leaves no trace here: the member's usage item stops naming it
        as their active thread."""
        self._on_active(user_id, project_id, conversation_id, "REMOVE #active", {}, {})

    def count_added(self, user_id: str, project_id: str, conversation_id: str, added: int) -> bool:
        """Count messages saved outside a turn on the member's active thread; ``False``
        when it is not their active thread (its item counts them)."""
        return self._on_active(
            user_id,
            project_id,
            conversation_id,
            "ADD #active.#count :added",
            {"#count": "messageCount"},
            {":added": to_value(added)},
        )

    def _on_active(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        expression: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> bool:
        """One update of the member's latest usage item while it names the thread as their
        active one, over the version read (another turn of theirs saved meanwhile: read
        again); ``False`` when it does not name it."""
        for _ in range(self._attempts):
            found = self.client.query(**self.latest_request(user_id, project_id))["Items"]
            kept = from_item(found[0]) if found else {}
            active = active_from(kept)
            if active is None or active.conversation_id != conversation_id:
                return False
            version = int(kept.get(VERSION, 0))
            try:
                self.client.update_item(
                    TableName=self._table,
                    Key={OWNER: found[0][OWNER], PERIOD: found[0][PERIOD]},
                    UpdateExpression=f"SET #version = :next {expression}",
                    ConditionExpression=_version_condition(version),
                    ExpressionAttributeNames={"#active": ACTIVE, "#version": VERSION, **names},
                    ExpressionAttributeValues={
                        ":version": to_value(version),
                        ":next": to_value(version + 1),
                        **values,
                    },
                )
                return True
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise translate(exc) from exc
        raise Conflict("The member's usage kept changing meanwhile; try again.")

    def _expires(self, now: datetime) -> int:
        return int((now + self._kept).timestamp())

    def turn_writes(
        self,
        user_id: str,
        project_id: str,
        read: MemberUsage,
        counts: Counts,
        now: datetime,
        active: ActiveThread,
    ) -> list[dict[str, Any]]:
        """A turn's count, for its transaction: one update of the month item over the
        version it read, which also takes the turn's thread as the member's active one. On
        the month's first turn of a later day, the finished day is put apart and the day's
        counters start from this turn; on the month's first turn, the active thread moves off
        the item of the month that held it. Refused (the transaction's condition) when
        another turn of the member saved meanwhile: read again and count again.

        The item holding the active thread has no expiry: readers find the thread's state
        there however long the member is away. It expires once a later month's item takes
        the thread over."""
        today, month = day_of(now), month_of(now)
        names = {
            **_MONTH_NAMES,
            **_DAY_NAMES,
            "#day": "day",
            "#models": "models",
            "#dayModels": "dayModels",
            "#exp": EXPIRES,
            "#active": ACTIVE,
            "#version": VERSION,
        }
        same = read.month == month and read.exists
        values = {
            **_values(counts),
            ":day": to_value(today),
            ":models": {"SS": sorted(counts.models)},
            ":active": active_value(active),
            ":next": to_value(read.version + 1 if same else 1),
        }
        # The day the month item counted last, when this turn is the first of a later one.
        finished = read.day if same and read.day not in (None, today) else None
        kept = "#active = :active, #version = :next"
        if finished is None:
            expression = (
                f"SET #day = :day, {kept} "
                f"ADD {_ADD_MONTH}, {_ADD_DAY}, #models :models, #dayModels :models"
            )
        else:
            expression = (
                f"SET #day = :day, {kept}, {_SET_DAY}, #dayModels = :models "
                f"ADD {_ADD_MONTH}, #models :models"
            )
        expression += " REMOVE #exp"
        if same:
            condition = _version_condition(read.version)
            values[":version"] = to_value(read.version)
        else:
            condition = "attribute_not_exists(#owner)"
            names["#owner"] = OWNER
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": self.month_key(user_id, project_id, month),
                    "UpdateExpression": expression,
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        if finished is not None:
            day = self._counts_item(
                owner_key(user_id, project_id), DAY + finished, read.day_counts, now
            )
            writes.append({"Put": {"TableName": self._table, "Item": day}})
        if read.latest_month is not None and read.latest_month != month:
            writes.append(self._moved_off(user_id, project_id, read, now))
        return writes

    def _moved_off(
        self, user_id: str, project_id: str, read: MemberUsage, now: datetime
    ) -> dict[str, Any]:
        """The earlier month's item gives up the active thread (over the version the turn
        read, so a turn still saving into that month comes first) and starts to expire."""
        assert read.latest_month is not None
        return {
            "Update": {
                "TableName": self._table,
                "Key": self.month_key(user_id, project_id, read.latest_month),
                "UpdateExpression": "SET #exp = :exp, #version = :next REMOVE #active",
                "ConditionExpression": f"attribute_exists(#owner) AND "
                f"{_version_condition(read.version)}",
                "ExpressionAttributeNames": {
                    "#owner": OWNER,
                    "#exp": EXPIRES,
                    "#active": ACTIVE,
                    "#version": VERSION,
                },
                "ExpressionAttributeValues": {
                    ":exp": to_value(self._expires(now)),
                    ":next": to_value(read.version + 1),
                    ":version": to_value(read.version),
                },
            }
        }

    def _counts_item(self, owner: str, period: str, counts: Counts, now: datetime) -> Item:
        values: dict[str, Any] = {OWNER: owner, PERIOD: period, EXPIRES: self._expires(now)}
        values.update({attribute: getattr(counts, f) for attribute, f in _COUNTERS.items()})
        item = to_item(values)
        if counts.models:
            item["models"] = {"SS": sorted(counts.models)}
        return item

    def count_job(self, project_id: str, job: str, counts: Counts, now: datetime) -> None:
        """A background job's model call, under the project, by day and by month (one
        transaction, so the two never disagree)."""
        names = {**_MONTH_NAMES, "#exp": EXPIRES}
        values = {**_values(counts), ":exp": to_value(self._expires(now))}
        expression = f"SET #exp = :exp ADD {_ADD_MONTH}"
        if counts.models:
            expression += ", #models :models"
            names["#models"] = "models"
            values[":models"] = {"SS": sorted(counts.models)}
        periods = (MONTH + month_of(now), DAY + day_of(now))
        self.client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": to_item({OWNER: project_id, PERIOD: period + SEPARATOR + job}),
                        "UpdateExpression": expression,
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                }
                for period in periods
            ]
        )

    def members(
        self, project_id: str, user_ids: list[str], day: str | None, month: str
    ) -> dict[str, Counts]:
        """Each member's counters for ``day`` (``None``: the whole ``month``), one batched
        read: a day is on its month item while it is the last the month counted, else on
        its own item."""
        keys = []
        for user_id in user_ids:
            keys.append(self.month_key(user_id, project_id, month))
            if day is not None:
                keys.append(to_item({OWNER: owner_key(user_id, project_id), PERIOD: DAY + day}))
        # batch_get splits the keys into requests of at most 100.
        request = {self._table: {"Keys": keys, "ConsistentRead": True}}
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for item in batch_get(self.client, request).get(self._table, []):
            values = from_item(item)
            found[(values[OWNER], values[PERIOD])] = values
        counts: dict[str, Counts] = {}
        for user_id in user_ids:
            owner = owner_key(user_id, project_id)
            kept = found.get((owner, MONTH + month), {})
            if day is None:
                counts[user_id] = counts_from(kept)
            elif kept.get("day") == day:
                counts[user_id] = counts_from(kept, day=True)
            else:
                counts[user_id] = counts_from(found.get((owner, DAY + day), {}))
        return counts

    def jobs(self, project_id: str, day: str | None, month: str) -> dict[str, Counts]:
        """The project's background jobs' counters for ``day`` (or the whole ``month``), by
        job."""
        prefix = (DAY + day if day is not None else MONTH + month) + SEPARATOR
        found: dict[str, Counts] = {}
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="#owner = :owner AND begins_with(#period, :prefix)",
            ExpressionAttributeNames={"#owner": OWNER, "#period": PERIOD},
            ExpressionAttributeValues={
                ":owner": to_value(project_id),
                ":prefix": to_value(prefix),
            },
        ):
            for item in page["Items"]:
                values = from_item(item)
                found[values[PERIOD].removeprefix(prefix)] = counts_from(values)
        return found

    def erase(self, user_id: str, project_id: str, max_items: int) -> int:
        """Delete up to ``max_items`` of a member's counters; fewer means none are left."""
        return self._erase(owner_key(user_id, project_id), max_items)

    def erase_jobs(self, project_id: str, max_items: int) -> int:
        return self._erase(project_id, max_items)

    def _erase(self, owner: str, max_items: int) -> int:
        query = {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": OWNER},
            "ExpressionAttributeValues": {":owner": to_value(owner)},
            "ConsistentRead": True,
        }
        return delete_found(self.client, query, (OWNER, PERIOD), max_items)
