"""The Sessions table: a member's sessions in a project, under
``owner = <userId>#<projectId>`` and sorted by ``start`` (the stamp of the session's first
turn), so the newest, the live one if any, comes first.

A session's item is put once, by the turn that starts it, in that turn's transaction, with
``dueAt`` (when it can end: its last turn plus ``SESSION_IDLE_SECONDS`` and
``SESSION_END_GRACE_SECONDS``) and ``dueBucket``, which put it in the sparse ``byDue``
index the prune-sessions job reads. Whoever ends it sets ``endedAt``, ``lastTurnAt``,
``turns`` and ``tokens``: the job takes it out of the index at once; a turn that starts
the member's next session first puts the ended one due now, so the job gives extraction
its turn for it. Items expire ``USAGE_KEPT_DAYS`` after they end (``expiresAt``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain import clock
from recall.domain.sessions import Session, SessionStep, SessionTally
from recall.settings import Settings
from recall.store.cursors import decode_cursor, encode_cursor, list_tag, not_this_cursor
from recall.store.due import due_items
from recall.store.dynamodb import (
    Item,
    StoredItem,
    delete_found,
    dynamodb_client,
    error_code,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import SEPARATOR, due_bucket, due_buckets, owner_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

OWNER = "owner"
START = "start"
_NAMES = {
    "#owner": OWNER,
    "#start": START,
    "#endedAt": "endedAt",
    "#lastTurnAt": "lastTurnAt",
    "#turns": "turns",
    "#tokens": "tokens",
    "#dueAt": "dueAt",
    "#dueBucket": "dueBucket",
    "#expiresAt": "expiresAt",
}


class SessionItem(StoredItem):
    owner: str
    start: str
    ended_at: str | None = None
    last_turn_at: str | None = None
    turns: int = 0
    tokens: int = 0
    due_at: str | None = None

    def session(self) -> Session:
        user_id, _, project_id = self.owner.partition(SEPARATOR)
        return Session(
            user_id=user_id,
            project_id=project_id,
            started_at=self.start,
            ended_at=self.ended_at,
            last_turn_at=self.last_turn_at,
            turns=self.turns,
            tokens=self.tokens,
        )


@dataclass(frozen=True)
class DueSession:
    """A session the index says is due, with the ``dueAt`` it was read at."""

    session: Session
    due_at: str


def _key(user_id: str, project_id: str, start: str) -> Item:
    return to_item({OWNER: owner_key(user_id, project_id), START: start})


class SessionStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.sessions_table
        self._client = client
        self._shards = settings.due_shards
        self._lookback_hours = settings.maintenance_lookback_hours
        self._kept = timedelta(days=settings.usage_kept_days)
        self._idle = timedelta(seconds=settings.session_idle_seconds)
        self._grace = timedelta(seconds=settings.session_end_grace_seconds)

    def due_at(self, tally: SessionTally) -> str:
        """When the job may end the tally's session: its last turn, the idle time, the
        grace."""
        return tally.ends_at(self._idle + self._grace)

    def ended(self, session: Session, tally: SessionTally | None, now: datetime) -> Session:
        """``session`` as the job ends it: with its tally, or, when its member's usage no
        longer counts it (their usage items expired), at ``now`` with what it holds."""
        if tally is None or tally.started_at != session.started_at:
            return session.model_copy(update={"ended_at": clock.stamp(now)})
        return tally.ended(session, self._idle)

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def _due(self, user_id: str, project_id: str, due_at: str) -> dict[str, str]:
        return {
            ":dueAt": due_at,
            ":dueBucket": due_bucket(owner_key(user_id, project_id), due_at, self._shards),
        }

    def _expires(self, at: str) -> int:
        return int((clock.parse(at) + self._kept).timestamp())

    def start_request(self, user_id: str, project_id: str, step: SessionStep) -> dict[str, Any]:
        """The turn's put of the session it starts (never over one: a start is unique)."""
        tally = step.tally
        due_at = self.due_at(tally)
        item = {
            OWNER: owner_key(user_id, project_id),
            START: tally.started_at,
            "dueAt": due_at,
            "dueBucket": self._due(user_id, project_id, due_at)[":dueBucket"],
            "expiresAt": self._expires(due_at),
        }
        return {
            "TableName": self._table,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(#start)",
            "ExpressionAttributeNames": {"#start": START},
        }

    def end_request(
        self, user_id: str, project_id: str, tally: SessionTally, at: str
    ) -> dict[str, Any]:
        """A turn that starts the member's next session ends the one ``tally`` counted,
        still live, due at ``at`` so the job gives extraction its turn for it."""
        session = Session(user_id=user_id, project_id=project_id, started_at=tally.started_at)
        ended = tally.ended(session, self._idle)
        values = {**self._end_values(ended), **self._due(user_id, project_id, at)}
        return {
            "TableName": self._table,
            "Key": _key(user_id, project_id, ended.started_at),
            "UpdateExpression": _END + ", #dueAt = :dueAt, #dueBucket = :dueBucket",
            "ConditionExpression": "attribute_exists(#start) AND attribute_not_exists(#endedAt)",
            "ExpressionAttributeNames": _names(_END, "#dueAt", "#dueBucket", "#start"),
            "ExpressionAttributeValues": {k: to_value(v) for k, v in values.items()},
        }

    def _end_values(self, ended: Session) -> dict[str, Any]:
        assert ended.ended_at is not None
        return {
            ":endedAt": ended.ended_at,
            ":lastTurnAt": ended.last_turn_at,
            ":turns": ended.turns,
            ":tokens": ended.tokens,
            ":expiresAt": self._expires(ended.ended_at),
        }

    def due(self, now: datetime) -> Iterator[DueSession]:
        """Every session due by ``now``, reading only the due buckets of ``byDue``."""
        buckets = due_buckets(now, self._lookback_hours, self._shards)
        for item in due_items(self.client, self._table, buckets, now):
            read = SessionItem.model_validate(from_item(item))
            assert read.due_at is not None
            yield DueSession(read.session(), read.due_at)

    def end(self, due: DueSession, ended: Session) -> bool:
        """The job ends a live session it read due: False when something else moved it."""
        values = {**self._end_values(ended), ":seen": due.due_at}
        expression = _END + " REMOVE #dueAt, #dueBucket"
        return self._update(
            due,
            expression,
            "#dueAt = :seen AND attribute_not_exists(#endedAt)",
            _names(_END, "#dueAt", "#dueBucket"),
            values,
        )

    def postpone(self, due: DueSession, due_at: str) -> bool:
        """A live session whose member turned again: due again when it can next end."""
        session = due.session
        values = {**self._due(session.user_id, session.project_id, due_at), ":seen": due.due_at}
        return self._update(
            due,
            "SET #dueAt = :dueAt, #dueBucket = :dueBucket",
            "#dueAt = :seen",
            _names("#dueAt", "#dueBucket"),
            values,
        )

    def settle(self, due: DueSession) -> bool:
        """An ended session whose extraction was queued leaves the index."""
        return self._update(
            due,
            "REMOVE #dueAt, #dueBucket",
            "#dueAt = :seen",
            _names("#dueAt", "#dueBucket"),
            {":seen": due.due_at},
        )

    def _update(
        self,
        due: DueSession,
        expression: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> bool:
        session = due.session
        try:
            self.client.update_item(
                TableName=self._table,
                Key=_key(session.user_id, session.project_id, session.started_at),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={k: to_value(v) for k, v in values.items()},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise translate(exc) from exc
        return True

    def page(
        self, user_id: str, project_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Session], str | None]:
        """The member's sessions, newest first (the live one, if any, is the newest)."""
        owner = owner_key(user_id, project_id)
        this_list = list_tag(owner, "sessions")
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": OWNER},
            "ExpressionAttributeValues": {":owner": to_value(owner)},
            "ScanIndexForward": False,
            "Limit": limit,
            "ConsistentRead": True,
        }
        if cursor:
            start = decode_cursor(cursor, {"list", START})
            if start["list"] != this_list:
                raise not_this_cursor("from another list")
            _check_stamp(start[START])
            query["ExclusiveStartKey"] = to_item({OWNER: owner, START: start[START]})
        result = self.client.query(**query)
        sessions = [SessionItem.model_validate(from_item(i)).session() for i in result["Items"]]
        last = result.get("LastEvaluatedKey")
        next_cursor = None
        if last:
            next_cursor = encode_cursor({"list": this_list, START: from_item(last)[START]})
        return sessions, next_cursor

    def erase(self, user_id: str, project_id: str, max_items: int) -> int:
        """Delete up to ``max_items`` of a member's sessions; fewer means none are left."""
        query = {
            "TableName": self._table,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": OWNER},
            "ExpressionAttributeValues": {":owner": to_value(owner_key(user_id, project_id))},
            "ConsistentRead": True,
        }
        return delete_found(self.client, query, (OWNER, START), max_items)


_END = (
    "SET #endedAt = :endedAt, #lastTurnAt = :lastTurnAt, #turns = :turns, #tokens = :tokens,"
    " #expiresAt = :expiresAt"
)


def _names(*parts: str) -> dict[str, str]:
    """The attribute names the expression parts use (DynamoDB refuses any other)."""
    used = " ".join(parts)
    return {name: attribute for name, attribute in _NAMES.items() if name in used}


def _check_stamp(value: str) -> None:
    try:
        if clock.stamp(clock.parse(value)) == value:
            return
    except ValueError:
        pass
    raise not_this_cursor("not a position in this list")
