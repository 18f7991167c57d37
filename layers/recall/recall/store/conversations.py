"""The Conversations table: one item per thread under ``owner = <userId>#<projectId>``.

The ``byRecency`` index sorts a caller's threads by ``recency``
(``L#<updatedAt>#<id>`` live, ``A#…`` archived, ``D#…`` being deleted), so the newest
page of either list is one query and a thread being deleted drops out of both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from recall.domain.conversations import Conversation
from recall.errors import Conflict, Forbidden, Invalid, NotFound
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    cancellation_codes,
    decode_cursor,
    dynamodb_client,
    encode_cursor,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import owner_key, owner_parts

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BY_RECENCY = "byRecency"
_LIVE = "attribute_exists(#sk) AND attribute_not_exists(#deleting)"
_LIVE_NAMES = {"#sk": "conversationId", "#deleting": "deleting"}
LIVE = "L#"
ARCHIVED = "A#"
DELETING = "D#"


def conversation_key(user_id: str, project_id: str, conversation_id: str) -> Item:
    return to_item({"owner": owner_key(user_id, project_id), "conversationId": conversation_id})


def recency(archived: bool, updated_at: str, conversation_id: str) -> str:
    return f"{ARCHIVED if archived else LIVE}{updated_at}#{conversation_id}"


class ConversationItem(Conversation):
    """A thread as the table holds it: camelCase attributes under its owner, with its
    place in the recency index and the mark of a delete in progress."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    owner: str
    recency: str
    deleting: bool | None = None


def conversation_item(conversation: Conversation) -> Item:
    record = ConversationItem(
        **conversation.model_dump(),
        owner=owner_key(conversation.user_id, conversation.project_id),
        recency=recency(
            conversation.archived, conversation.updated_at, conversation.conversation_id
        ),
    )
    return to_item(record.model_dump(by_alias=True, exclude={"user_id", "project_id"}))


def conversation_from(item: Item) -> Conversation | None:
    """``None`` for a thread that is being deleted: to callers it is already gone."""
    values = from_item(item)
    if values.get("deleting"):
        return None
    user_id, project_id = owner_parts(values["owner"])
    record = ConversationItem.model_validate({**values, "userId": user_id, "projectId": project_id})
    return Conversation.model_validate(record.model_dump(exclude={"owner", "recency", "deleting"}))


class ConversationStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.conversations_table
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def create(self, conversation: Conversation, guard: dict[str, Any] | None = None) -> None:
        """``guard``, a ``ConditionCheck`` that the caller still holds their role, joins the
        put: a caller removed or erased since their role was read is Forbidden."""
        try:
            if guard is None:
                self.client.put_item(**self.create_request(conversation))
            else:
                items: Any = [{"Put": self.create_request(conversation)}, {"ConditionCheck": guard}]
                self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if guard is not None and cancellation_codes(exc)[1:] == ["ConditionalCheckFailed"]:
                raise Forbidden(
                    "Your role on this project changed: it no longer allows this."
                ) from exc
            raise translate(exc, "A conversation with this id already exists.") from exc

    def create_request(self, conversation: Conversation) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Item": conversation_item(conversation),
            "ConditionExpression": "attribute_not_exists(#sk)",
            "ExpressionAttributeNames": {"#sk": "conversationId"},
        }

    def get(self, user_id: str, project_id: str, conversation_id: str) -> Conversation | None:
        item = self.client.get_item(
            TableName=self._table,
            Key=conversation_key(user_id, project_id, conversation_id),
            ConsistentRead=True,
        ).get("Item")
        return conversation_from(item) if item else None

    def page(
        self, user_id: str, project_id: str, archived: bool, limit: int, cursor: str | None
    ) -> tuple[list[Conversation], str | None]:
        """The caller's threads, most recently updated first."""
        owner = owner_key(user_id, project_id)
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": BY_RECENCY,
            "KeyConditionExpression": "#owner = :owner AND begins_with(#recency, :prefix)",
            "ExpressionAttributeNames": {"#owner": "owner", "#recency": "recency"},
            "ExpressionAttributeValues": {
                ":owner": to_value(owner),
                ":prefix": to_value(ARCHIVED if archived else LIVE),
            },
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if cursor:
            start = decode_cursor(cursor, {"recency", "conversationId"})
            prefix = ARCHIVED if archived else LIVE
            if not (
                start["recency"].startswith(prefix)
                and start["recency"].endswith(f"#{start['conversationId']}")
            ):
                # DynamoDB refuses a start key outside the query's range (moto does not)
                raise Invalid(
                    "The cursor belongs to another list; start again without it.",
                    [{"field": "cursor", "message": "from another list"}],
                )
            query["ExclusiveStartKey"] = to_item({"owner": owner, **start})
        result = self.client.query(**query)
        rows = [row for row in map(conversation_from, result["Items"]) if row is not None]
        last = result.get("LastEvaluatedKey")
        next_cursor = None
        if last:
            values = from_item(last)
            next_cursor = encode_cursor(
                {"recency": values["recency"], "conversationId": values["conversationId"]}
            )
        return rows, next_cursor

    def every(self, user_id: str, project_id: str) -> Iterator[Conversation]:
        """Every thread of the caller, live and archived, oldest first (by id), a page
        at a time: what an export reads."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#owner = :owner",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":owner": to_value(owner_key(user_id, project_id))},
            ConsistentRead=True,
        )
        for page in pages:
            yield from (row for row in map(conversation_from, page["Items"]) if row is not None)

    def latest(self, user_id: str, project_id: str) -> Conversation | None:
        rows, _ = self.page(user_id, project_id, archived=False, limit=1, cursor=None)
        return rows[0] if rows else None

    def update(self, conversation: Conversation) -> Conversation:
        """Write a thread's title, archive flag, settings overrides and updatedAt (which
        moves it in its list)."""
        overrides = conversation.settings
        settings = (
            {":settings": overrides.model_dump(by_alias=True, exclude_none=True)}
            if overrides is not None
            else {}
        )
        self._update_live(
            conversation.user_id,
            conversation.project_id,
            conversation.conversation_id,
            "SET #title = :title, #archived = :archived, #updatedAt = :updatedAt,"
            " #recency = :recency"
            + (", #settings = :settings" if settings else " REMOVE #settings"),
            {
                "#title": "title",
                "#archived": "archived",
                "#updatedAt": "updatedAt",
                "#recency": "recency",
                "#settings": "settings",
            },
            {
                **settings,
                ":title": conversation.title,
                ":archived": conversation.archived,
                ":updatedAt": conversation.updated_at,
                ":recency": recency(
                    conversation.archived, conversation.updated_at, conversation.conversation_id
                ),
            },
        )
        return conversation

    def turn_update_request(
        self,
        conversation: Conversation,
        added_messages: int,
        model: str,
        updated_at: str,
        window_start: str | None,
        last_message_id: str,
    ) -> dict[str, Any]:
        """The counters a turn moves and where its window now starts, for the turn's
        transaction, over the version the turn read: fails if the thread was deleted, or
        another turn, an archive or unarchive (its place in the list follows the flag) came
        first."""
        names = {
            **_LIVE_NAMES,
            "#archived": "archived",
            "#version": "version",
            "#updatedAt": "updatedAt",
            "#recency": "recency",
            "#model": "model",
            "#lastMessageId": "lastMessageId",
            "#messageCount": "messageCount",
            "#turnCount": "turnCount",
        }
        values = {
            ":updatedAt": to_value(updated_at),
            ":recency": to_value(
                recency(conversation.archived, updated_at, conversation.conversation_id)
            ),
            ":model": to_value(model),
            ":archived": to_value(conversation.archived),
            ":version": to_value(conversation.version),
            ":next": to_value(conversation.version + 1),
            ":last": to_value(last_message_id),
            ":added": to_value(added_messages),
            ":one": to_value(1),
        }
        assignments = (
            "SET #updatedAt = :updatedAt, #recency = :recency, #model = :model,"
            " #version = :next, #lastMessageId = :last"
        )
        if window_start is None:
            window = " REMOVE #windowStart"
        else:
            window = ""
            assignments += ", #windowStart = :start"
            values[":start"] = to_value(window_start)
        names["#windowStart"] = "windowStart"
        # A thread saved before versions were kept has none: it reads as 0.
        version = (
            "(#version = :version OR attribute_not_exists(#version))"
            if conversation.version == 0
            else "#version = :version"
        )
        return {
            "TableName": self._table,
            "Key": conversation_key(
                conversation.user_id, conversation.project_id, conversation.conversation_id
            ),
            "UpdateExpression": assignments + " ADD #messageCount :added, #turnCount :one" + window,
            "ConditionExpression": f"{_LIVE} AND #archived = :archived AND {version}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def count_added_messages(
        self, user_id: str, project_id: str, conversation_id: str, added: int
    ) -> None:
        """Count messages saved outside a turn (seeded or backfilled) on their thread."""
        self._update_live(
            user_id,
            project_id,
            conversation_id,
            "ADD #messageCount :added",
            {"#messageCount": "messageCount"},
            {":added": added},
        )

    def mark_cleared(
        self, user_id: str, project_id: str, conversation_id: str, marker: str
    ) -> None:
        """The clear-context marker: later windows start after it, and the rolling summary
        starts again. A turn racing the clear needs no retry: its messages get their ids as
        it saves, so they fall after the marker unless the clear came after the save, and
        the window start it writes is read only past the marker."""
        self._update_live(
            user_id,
            project_id,
            conversation_id,
            "SET #clearedAfter = :marker REMOVE #summary, #summaryThrough",
            {
                "#clearedAfter": "clearedAfter",
                "#summary": "summary",
                "#summaryThrough": "summaryThrough",
            },
            {":marker": marker},
        )

    def _update_live(
        self,
        user_id: str,
        project_id: str,
        conversation_id: str,
        expression: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> None:
        """One update of a thread that exists and is not being deleted; else NotFound."""
        try:
            self.client.update_item(
                TableName=self._table,
                Key=conversation_key(user_id, project_id, conversation_id),
                UpdateExpression=expression,
                ConditionExpression=_LIVE,
                ExpressionAttributeNames={**_LIVE_NAMES, **names},
                ExpressionAttributeValues={name: to_value(value) for name, value in values.items()},
            )
        except ClientError as exc:
            raise _missing_if_conflict(exc) from exc

    def save_summary(self, conversation: Conversation, text: str, through: str) -> bool:
        """The thread's rolling summary, now covering messages up to ``through``, written only
        over the summary this job read and within the same clear-context period: ``False``
        when another job or a clear got there first (the next job starts from theirs)."""
        names = {
            **_LIVE_NAMES,
            "#summary": "summary",
            "#summaryThrough": "summaryThrough",
            "#clearedAfter": "clearedAfter",
        }
        values: dict[str, Any] = {":text": to_value(text), ":through": to_value(through)}
        conditions = [_LIVE]
        if conversation.summary_through is None:
            conditions.append("attribute_not_exists(#summaryThrough)")
        else:
            conditions.append("#summaryThrough = :seen")
            values[":seen"] = to_value(conversation.summary_through)
        if conversation.cleared_after is None:
            conditions.append("attribute_not_exists(#clearedAfter)")
        else:
            conditions.append("#clearedAfter = :cleared")
            values[":cleared"] = to_value(conversation.cleared_after)
        try:
            self.client.update_item(
                TableName=self._table,
                Key=conversation_key(
                    conversation.user_id, conversation.project_id, conversation.conversation_id
                ),
                UpdateExpression="SET #summary = :text, #summaryThrough = :through",
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if isinstance(translate(exc), Conflict):
                return False
            raise
        return True

    def mark_deleting(self, user_id: str, project_id: str, conversation_id: str) -> None:
        """Hide the thread first, so a delete that stops half-way can simply be retried."""
        try:
            self.client.update_item(
                TableName=self._table,
                Key=conversation_key(user_id, project_id, conversation_id),
                UpdateExpression="SET #deleting = :true, #recency = :recency",
                ConditionExpression="attribute_exists(#sk)",
                ExpressionAttributeNames={
                    "#sk": "conversationId",
                    "#deleting": "deleting",
                    "#recency": "recency",
                },
                ExpressionAttributeValues={
                    ":true": to_value(True),
                    ":recency": to_value(f"{DELETING}{conversation_id}"),
                },
            )
        except ClientError as exc:
            raise _missing_if_conflict(exc) from exc

    def delete(self, user_id: str, project_id: str, conversation_id: str) -> None:
        self.client.delete_item(
            TableName=self._table, Key=conversation_key(user_id, project_id, conversation_id)
        )

    def ids(self, user_id: str, project_id: str, limit: int) -> list[str]:
        """Up to ``limit`` ids of the caller's threads in the project, live, archived or
        being deleted alike (an erasure takes them all, a page at a time)."""
        result = self.client.query(
            TableName=self._table,
            KeyConditionExpression="#owner = :owner",
            ExpressionAttributeNames={"#owner": "owner", "#sk": "conversationId"},
            ExpressionAttributeValues={":owner": to_value(owner_key(user_id, project_id))},
            ProjectionExpression="#sk",
            ConsistentRead=True,
            Limit=limit,
        )
        return [str(from_item(item)["conversationId"]) for item in result["Items"]]


def _missing_if_conflict(exc: ClientError) -> Exception:
    error = translate(exc)
    return NotFound("No such conversation.") if isinstance(error, Conflict) else error
