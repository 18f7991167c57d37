"""The writes of a thread's policy item (``<conversationId>#policy``): the clear-context
marker, which starts the rolling summary again, and the summary job's new summary. Each is
one transaction over both of the thread's items."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from recall.domain.conversations import Conversation
from recall.errors import Conflict
from recall.store.conversation_items import conversation_key, policy_key
from recall.store.conversation_table import (
    LIVE_THREAD,
    LIVE_THREAD_NAMES,
    ConversationTable,
    missing_if_conflict,
)
from recall.store.dynamodb import to_value, translate


class ConversationPolicy(ConversationTable):
    def mark_cleared(
        self, user_id: str, project_id: str, conversation_id: str, marker: str
    ) -> None:
        """The clear-context marker: later windows start after it, and the rolling summary
        starts again (gone from the policy item, and from the thread's item if it is older
        than the split). A turn racing the clear needs no retry: its messages get their ids
        as it saves, so they fall after the marker unless the clear came after the save, and
        the window start it writes is read only past the marker."""
        summary = {"#summary": "summary", "#summaryThrough": "summaryThrough"}
        thread = {
            "TableName": self._table,
            "Key": conversation_key(user_id, project_id, conversation_id),
            "UpdateExpression": "SET #clearedAfter = :marker REMOVE #summary, #summaryThrough",
            "ConditionExpression": LIVE_THREAD,
            "ExpressionAttributeNames": {
                **LIVE_THREAD_NAMES,
                **summary,
                "#clearedAfter": "clearedAfter",
            },
            "ExpressionAttributeValues": {":marker": to_value(marker)},
        }
        policy = {
            "TableName": self._table,
            "Key": policy_key(user_id, project_id, conversation_id),
            "UpdateExpression": "REMOVE #summary, #summaryThrough",
            "ExpressionAttributeNames": summary,
        }
        try:
            items: Any = [{"Update": thread}, {"Update": policy}]
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            raise missing_if_conflict(exc) from exc

    def save_summary(self, conversation: Conversation, text: str, through: str) -> bool:
        """The thread's rolling summary, now covering messages up to ``through``, written to
        its policy item only over the summary this job read and within the same
        clear-context period: ``False`` when another job or a clear got there first (the
        next job starts from theirs). The thread's item, checked for the period, drops a
        summary it kept from before the split, so the policy item's is the only one."""
        names = {"#summary": "summary", "#summaryThrough": "summaryThrough"}
        values: dict[str, Any] = {}
        if conversation.summary_through is None:
            seen = "attribute_not_exists(#summaryThrough)"
        else:
            # An older thread's summary was on its own item: the policy item has none yet.
            seen = "(attribute_not_exists(#summaryThrough) OR #summaryThrough = :seen)"
            values[":seen"] = to_value(conversation.summary_through)
        period = {**LIVE_THREAD_NAMES, "#clearedAfter": "clearedAfter"}
        if conversation.cleared_after is None:
            cleared = "attribute_not_exists(#clearedAfter)"
            period_values: dict[str, Any] = {}
        else:
            cleared = "#clearedAfter = :cleared"
            period_values = {":cleared": to_value(conversation.cleared_after)}
        owner = (conversation.user_id, conversation.project_id, conversation.conversation_id)
        thread: dict[str, Any] = {
            "TableName": self._table,
            "Key": conversation_key(*owner),
            "UpdateExpression": "REMOVE #summary, #summaryThrough",
            "ConditionExpression": f"{LIVE_THREAD} AND {cleared} AND {seen}",
            "ExpressionAttributeNames": {**names, **period},
            "ExpressionAttributeValues": {**values, **period_values},
        }
        policy = {
            "TableName": self._table,
            "Key": policy_key(*owner),
            "UpdateExpression": "SET #summary = :text, #summaryThrough = :through",
            "ConditionExpression": seen,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {
                **values,
                ":text": to_value(text),
                ":through": to_value(through),
            },
        }
        if not thread["ExpressionAttributeValues"]:
            del thread["ExpressionAttributeValues"]
        try:
            items: Any = [{"Update": thread}, {"Update": policy}]
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if isinstance(translate(exc), Conflict):
                return False
            raise
        return True
