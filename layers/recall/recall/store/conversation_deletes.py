"""How a thread goes: hidden first (``deleting``, out of both lists), then deleted with
its policy item; a thread a refused first turn left empty; and the ids an erasure takes,
a page at a time."""

from __future__ import annotations

from botocore.exceptions import ClientError

from recall.domain.conversations import Conversation
from recall.store.conversation_items import (
    DELETING,
    POLICY_SUFFIX,
    conversation_key,
    policy_key,
    thread_keys,
)
from recall.store.conversation_table import ConversationTable, missing_if_conflict
from recall.store.dynamodb import error_code, from_item, to_value, translate
from recall.store.keys import owner_key


class ConversationDeletes(ConversationTable):
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
            raise missing_if_conflict(exc) from exc

    def abandon(self, conversation: Conversation) -> bool:
        """Delete a thread a turn made but saved nothing to (no ``lastMessageId`` yet), so a
        refused first message leaves no empty thread behind; ``False`` when a turn saved
        into it meanwhile, and it stays."""
        place = (conversation.user_id, conversation.project_id, conversation.conversation_id)
        try:
            self.client.delete_item(
                TableName=self._table,
                Key=conversation_key(*place),
                ConditionExpression="attribute_not_exists(#last)",
                ExpressionAttributeNames={"#last": "lastMessageId"},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise translate(exc) from exc
        self.client.delete_item(TableName=self._table, Key=policy_key(*place))
        return True

    def delete(self, user_id: str, project_id: str, conversation_id: str) -> None:
        """Both items of the thread, its policy item first: a delete that stops between
        the two leaves the thread's item, and a retry finds it."""
        for key in reversed(thread_keys(user_id, project_id, conversation_id)):
            self.client.delete_item(TableName=self._table, Key=key)

    def ids(self, user_id: str, project_id: str, limit: int) -> list[str]:
        """The ids of the caller's threads in the project among the first ``limit`` items,
        live, archived or being deleted alike (an erasure takes them all, a page at a time);
        a policy item names its thread, so one left alone is found too."""
        result = self.client.query(
            TableName=self._table,
            KeyConditionExpression="#owner = :owner",
            ExpressionAttributeNames={"#owner": "owner", "#sk": "conversationId"},
            ExpressionAttributeValues={":owner": to_value(owner_key(user_id, project_id))},
            ProjectionExpression="#sk",
            ConsistentRead=True,
            Limit=limit,
        )
        found = (str(from_item(item)["conversationId"]) for item in result["Items"])
        return list(dict.fromkeys(sort_key.removesuffix(POLICY_SUFFIX) for sort_key in found))
