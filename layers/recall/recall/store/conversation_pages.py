"""The thread store's lists: a page of the caller's live or archived threads, newest
first (one query of the ``byRecency`` index), the threads a session left for extraction
(the same index over the session's time), and every thread with its policy item for an
export (one query of the caller's partition, page by page)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from recall.domain.conversations import Conversation
from recall.errors import Invalid
from recall.store.conversation_items import (
    ARCHIVED,
    BY_RECENCY,
    LIVE,
    POLICY_SUFFIX,
    conversation_from,
    is_policy,
)
from recall.store.conversation_table import ConversationTable
from recall.store.cursors import decode_cursor, encode_cursor, list_tag
from recall.store.dynamodb import Item, from_item, to_item, to_value
from recall.store.keys import owner_key


class ConversationPages(ConversationTable):
    def page(
        self,
        user_id: str,
        project_id: str,
        archived: bool,
        limit: int,
        cursor: str | None,
        consistent: bool = False,
    ) -> tuple[list[Conversation], str | None]:
        """The caller's threads, most recently updated first. ``consistent``: see every
        write acknowledged before (the index is local, so it may be read that way)."""
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
            "ConsistentRead": consistent,
        }
        prefix = ARCHIVED if archived else LIVE
        this_list = list_tag(owner, prefix)
        if cursor:
            start = decode_cursor(cursor, {"list", "recency", "conversationId"})
            if not (
                start.pop("list") == this_list
                and start["recency"].startswith(prefix)
                and start["recency"].endswith(f"#{start['conversationId']}")
            ):
                # DynamoDB refuses a start key outside the query's range (moto does not);
                # one of another user's or project's list would page this one by position.
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
                {
                    "list": this_list,
                    "recency": values["recency"],
                    "conversationId": values["conversationId"],
                }
            )
        return rows, next_cursor

    def signalled_between(
        self, user_id: str, project_id: str, start: str, end: str, limit: int
    ) -> list[str]:
        """Up to ``limit`` of the caller's live threads last updated from ``start`` to
        ``end`` (stamps) that hold user messages with preference signals no extraction has
        read (``signalsAt``), newest first: what a session that ended left for extraction."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            IndexName=BY_RECENCY,
            KeyConditionExpression="#owner = :owner AND #recency BETWEEN :from AND :to",
            FilterExpression="attribute_exists(#signalsAt)",
            ExpressionAttributeNames={
                "#owner": "owner",
                "#recency": "recency",
                "#signalsAt": "signalsAt",
            },
            ExpressionAttributeValues={
                ":owner": to_value(owner_key(user_id, project_id)),
                ":from": to_value(LIVE + start),
                ":to": to_value(LIVE + end + "~"),
            },
            ScanIndexForward=False,
            ConsistentRead=True,
        )
        found: list[str] = []
        for page in pages:
            found += [from_item(item)["conversationId"] for item in page["Items"]]
            if len(found) >= limit:
                break
        return found[:limit]

    def every(self, user_id: str, project_id: str) -> Iterator[Conversation]:
        """Every thread of the caller, live and archived, oldest first (by id), a page
        at a time: what an export reads. A thread's policy item sorts right after it
        (``#`` sorts before every id character), perhaps on the next page."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#owner = :owner",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":owner": to_value(owner_key(user_id, project_id))},
            ConsistentRead=True,
        )
        held: Item | None = None
        for page in pages:
            for item in page["Items"]:
                values = from_item(item)
                if not is_policy(values):
                    if held is not None and (thread := conversation_from(held)) is not None:
                        yield thread
                    held = item
                    continue
                thread_id = str(values["conversationId"]).removesuffix(POLICY_SUFFIX)
                if held is not None and from_item(held)["conversationId"] == thread_id:
                    if (thread := conversation_from(held, item)) is not None:
                        yield thread
                    held = None
        if held is not None and (thread := conversation_from(held)) is not None:
            yield thread

    def latest(self, user_id: str, project_id: str) -> Conversation | None:
        """Strongly consistent: a turn sent right after another must find its thread."""
        rows, _ = self.page(
            user_id, project_id, archived=False, limit=1, cursor=None, consistent=True
        )
        return rows[0] if rows else None
