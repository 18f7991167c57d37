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

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from recall.domain.sessions import SessionStep, SessionTally
from recall.domain.usage import Counts, MemberUsage, day_of, month_before, month_of
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    batch_get,
    delete_found,
    dynamodb_client,
    from_item,
    to_item,
    to_value,
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
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def month_key(self, user_id: str, project_id: str, month: str) -> Item:
        return to_item({OWNER: owner_key(user_id, project_id), PERIOD: MONTH + month})

    def turn_keys(self, user_id: str, project_id: str, now: datetime) -> list[Item]:
        """The month items a turn at ``now`` reads: this month's, and last month's for the
        session a member started there and goes on with now."""
        return [
            self.month_key(user_id, project_id, month)
            for month in (month_of(now), month_before(now))
        ]

    def member_usage(self, items: list[Item], now: datetime) -> MemberUsage:
        """A member's usage from the items ``turn_keys`` names (in any order; absent ones
        left out)."""
        month = month_of(now)
        found = {from_item(item)[PERIOD]: from_item(item) for item in items}
        this, before = found.get(MONTH + month), found.get(MONTH + month_before(now))
        session = _tally(this)
        carried = session is None and _tally(before) is not None
        return MemberUsage(
            month=month,
            month_counts=counts_from(this or {}),
            day=(this or {}).get("day"),
            day_counts=counts_from(this or {}, day=True),
            session=session or _tally(before),
            session_carried=carried,
        )

    def get(self, user_id: str, project_id: str, now: datetime) -> MemberUsage:
        """Strongly consistent: a turn whose count lost a race reads what won."""
        found = batch_get(
            self.client,
            {
                self._table: {
                    "Keys": self.turn_keys(user_id, project_id, now),
                    "ConsistentRead": True,
                }
            },
        )
        return self.member_usage(found.get(self._table, []), now)

    def _expires(self, now: datetime) -> int:
        return int((now + self._kept).timestamp())

    def turn_writes(
        self,
        user_id: str,
        project_id: str,
        read: MemberUsage,
        counts: Counts,
        now: datetime,
        session: SessionStep,
    ) -> list[dict[str, Any]]:
        """A turn's count, for its transaction: one update of the month item over the day it
        read, with the member's session tally (``_session_clauses``). On the month's first
        turn of a later day, the finished day is put apart and the day's counters start
        from this turn. Refused (the transaction's condition) when another turn moved the
        day or the session meanwhile: read again and count again."""
        today, month = day_of(now), month_of(now)
        names = {
            **_MONTH_NAMES,
            **_DAY_NAMES,
            "#day": "day",
            "#models": "models",
            "#dayModels": "dayModels",
            "#exp": EXPIRES,
        }
        values = {
            **_values(counts),
            ":day": to_value(today),
            ":models": {"SS": sorted(counts.models)},
            ":exp": to_value(self._expires(now)),
        }
        # The day the month item counted last, when this turn is the first of a later one.
        finished = read.day if read.month == month and read.day not in (None, today) else None
        if finished is None:
            expression = (
                f"SET #day = :day, #exp = :exp "
                f"ADD {_ADD_MONTH}, {_ADD_DAY}, #models :models, #dayModels :models"
            )
            condition = "attribute_not_exists(#owner) OR #day = :day"
            names["#owner"] = OWNER
        else:
            expression = (
                f"SET #day = :day, #exp = :exp, {_SET_DAY}, #dayModels = :models "
                f"ADD {_ADD_MONTH}, #models :models"
            )
            condition = "#day = :before"
            values[":before"] = to_value(finished)
        sets, adds, session_condition = _session_clauses(session, names, values)
        expression = expression.replace("SET ", f"SET {sets}, ", 1)
        if adds:
            expression += f", {adds}"
        update = {
            "Update": {
                "TableName": self._table,
                "Key": self.month_key(user_id, project_id, month),
                "UpdateExpression": expression,
                "ConditionExpression": f"({condition}) AND {session_condition}",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        if finished is None:
            return [update]
        day = self._counts_item(
            owner_key(user_id, project_id), DAY + finished, read.day_counts, now
        )
        return [update, {"Put": {"TableName": self._table, "Item": day}}]

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


_SESSION_NAMES = {
    "#sessionStart": "sessionStart",
    "#sessionTurns": "sessionTurns",
    "#sessionTokens": "sessionTokens",
    "#lastTurnAt": "lastTurnAt",
}


def _tally(values: dict[str, Any] | None) -> SessionTally | None:
    if not values or "sessionStart" not in values:
        return None
    return SessionTally(
        started_at=values["sessionStart"],
        last_turn_at=values["lastTurnAt"],
        turns=int(values.get("sessionTurns", 0)),
        tokens=int(values.get("sessionTokens", 0)),
    )


def _session_clauses(
    step: SessionStep, names: dict[str, str], values: dict[str, Any]
) -> tuple[str, str, str]:
    """The month item's part of a session step: its SET and ADD clauses and its condition.
    A session the item already counts adds to it, as long as it is still the one there; one
    that starts, or that last month's item counted, is set whole over what the turn read
    (nothing on this month's item, or the session and last turn it held)."""
    names.update(_SESSION_NAMES)
    tally, read = step.tally, step.read
    values[":lastTurnAt"] = to_value(tally.last_turn_at)
    if read is not None and not step.started and not step.carried:
        values[":sessionStart"] = to_value(tally.started_at)
        values[":sessionTurnsAdded"] = to_value(tally.turns - read.turns)
        values[":sessionTokensAdded"] = to_value(tally.tokens - read.tokens)
        return (
            "#lastTurnAt = :lastTurnAt",
            "#sessionTurns :sessionTurnsAdded, #sessionTokens :sessionTokensAdded",
            "#sessionStart = :sessionStart",
        )
    values.update(
        {
            ":sessionStart": to_value(tally.started_at),
            ":sessionTurns": to_value(tally.turns),
            ":sessionTokens": to_value(tally.tokens),
        }
    )
    sets = (
        "#lastTurnAt = :lastTurnAt, #sessionStart = :sessionStart,"
        " #sessionTurns = :sessionTurns, #sessionTokens = :sessionTokens"
    )
    if read is None or step.carried:
        return sets, "", "attribute_not_exists(#sessionStart)"
    values[":readStart"] = to_value(read.started_at)
    values[":readLast"] = to_value(read.last_turn_at)
    return sets, "", "#sessionStart = :readStart AND #lastTurnAt = :readLast"
