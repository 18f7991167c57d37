"""The Conversations table: a thread's item under ``owner = <userId>#<projectId>``, and
beside it, at ``<conversationId>#policy``, its policy item: its preset copy's context
prompts and its rolling summary.

Every turn rewrites the thread's item, and DynamoDB bills a write by the larger of the
item before and after it (twice in a transaction), so what is large and changes rarely
(up to ``CONTEXT_PROMPTS_MAX`` × ``CONTEXT_PROMPT_MAX_CHARS`` of prompts,
``SUMMARY_MAX_CHARS`` of summary) lives on the policy item, which only thread creation,
the summary job and a clear write; reads of one thread take both items together. A thread
saved before policy items existed keeps its prompts and summary on its own item: they are read from
there until the policy item has its own (the summary job moves the summary over).

The ``byRecency`` index sorts a caller's threads by ``recency``
(``L#<updatedAt>#<id>`` live, ``A#…`` archived, ``D#…`` being deleted), so the newest
page of either list is one query and a thread being deleted drops out of both. A policy
item has no ``recency``, so the index never holds it. The items' keys and shapes are
``recall.store.conversation_items``.

The store is one class in parts, each its own module over ``conversation_table``'s client
and conditions: ``conversation_pages`` (the lists), ``conversation_patch`` (a PATCH),
``conversation_policy`` (the clear-context marker and the summary) and
``conversation_deletes`` (hiding, deleting and an erasure's ids). Here: creating a thread,
reading one, and what a turn and an extraction write on it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from recall.domain.conversations import Conversation
from recall.errors import Forbidden
from recall.store.conversation_deletes import ConversationDeletes
from recall.store.conversation_items import (
    conversation_item,
    conversation_key,
    policy_item,
    recency,
    thread_from,
    thread_keys,
)
from recall.store.conversation_pages import ConversationPages
from recall.store.conversation_patch import ConversationPatch
from recall.store.conversation_policy import ConversationPolicy
from recall.store.conversation_table import (
    FAILED,
    LIVE_THREAD,
    LIVE_THREAD_NAMES,
    missing_if_conflict,
)
from recall.store.dynamodb import (
    Item,
    batch_get,
    cancellation_codes,
    error_code,
    to_value,
    translate,
)


class ConversationStore(
    ConversationPages, ConversationPatch, ConversationPolicy, ConversationDeletes
):
    def create(self, conversation: Conversation, guard: dict[str, Any] | None = None) -> None:
        """The thread's item and, with a preset, its policy item, together. ``guard``, a
        ``ConditionCheck`` that the caller still holds their role, joins the puts: a caller
        removed or erased since their role was read is Forbidden."""
        policy = policy_item(conversation)
        try:
            if guard is None and policy is None:
                self.client.put_item(**self._put_new(conversation_item(conversation)))
            else:
                items: Any = [{"Put": self._put_new(conversation_item(conversation))}]
                if policy is not None:
                    items.append({"Put": self._put_new(policy)})
                if guard is not None:
                    items.append({"ConditionCheck": guard})
                self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            codes = cancellation_codes(exc)
            if guard is not None and codes[-1:] == [FAILED] and FAILED not in codes[:-1]:
                raise Forbidden(
                    "Your role on this project changed: it no longer allows this."
                ) from exc
            raise translate(exc, "A conversation with this id already exists.") from exc

    def live_check(self, user_id: str, project_id: str, conversation_id: str) -> dict[str, Any]:
        """A ``ConditionCheck`` that the thread is still there and not being deleted when
        the transaction it joins lands: a write into a thread the delete has already swept
        would be left behind for good."""
        return {
            "TableName": self._table,
            "Key": conversation_key(user_id, project_id, conversation_id),
            "ConditionExpression": LIVE_THREAD,
            "ExpressionAttributeNames": LIVE_THREAD_NAMES,
        }

    def _put_new(self, item: Item) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#sk)",
            "ExpressionAttributeNames": {"#sk": "conversationId"},
        }

    def get(self, user_id: str, project_id: str, conversation_id: str) -> Conversation | None:
        """The thread with its policy item: one ``BatchGetItem`` of the two exact keys (the
        grant for exact keys, ``GetItem``'s batch form, not a Query)."""
        keys = thread_keys(user_id, project_id, conversation_id)
        request = {self._table: {"Keys": keys, "ConsistentRead": True}}
        return thread_from(batch_get(self.client, request).get(self._table, []))

    def turn_update_request(
        self,
        conversation: Conversation,
        added_messages: int,
        model: str,
        updated_at: str,
        window_start: str | None,
        last_message_id: str,
        signals: bool = False,
    ) -> dict[str, Any]:
        """The counters a turn moves and where its window now starts, for the turn's
        transaction, over the ``lastMessageId`` the turn read: fails if the thread was
        deleted, or another turn, an archive or unarchive (its place in the list follows
        the flag) came first. A rename does not stop it. A user message with preference
        ``signals`` stamps ``signalsAt``."""
        names = {
            **LIVE_THREAD_NAMES,
            "#archived": "archived",
            "#updatedAt": "updatedAt",
            "#recency": "recency",
            "#model": "model",
            "#lastMessageId": "lastMessageId",
            "#messageCount": "messageCount",
            "#turnCount": "turnCount",
            "#windowStart": "windowStart",
        }
        values: dict[str, Any] = {
            ":updatedAt": updated_at,
            ":recency": recency(conversation.archived, updated_at, conversation.conversation_id),
            ":model": model,
            ":archived": conversation.archived,
            ":last": last_message_id,
            ":added": added_messages,
            ":one": 1,
        }
        assignments = (
            "SET #updatedAt = :updatedAt, #recency = :recency, #model = :model,"
            " #lastMessageId = :last"
        )
        if window_start is None:
            window = " REMOVE #windowStart"
        else:
            window = ""
            assignments += ", #windowStart = :start"
            values[":start"] = window_start
        if signals:
            assignments += ", #signalsAt = :updatedAt"
            names["#signalsAt"] = "signalsAt"
        # The lock: the newest message the turn read (none on a thread with no turn yet).
        if conversation.last_message_id is None:
            seen = "attribute_not_exists(#lastMessageId)"
        else:
            seen = "#lastMessageId = :seen"
            values[":seen"] = conversation.last_message_id
        return {
            "TableName": self._table,
            "Key": conversation_key(
                conversation.user_id, conversation.project_id, conversation.conversation_id
            ),
            "UpdateExpression": assignments + " ADD #messageCount :added, #turnCount :one" + window,
            "ConditionExpression": f"{LIVE_THREAD} AND #archived = :archived AND {seen}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {name: to_value(v) for name, v in values.items()},
        }

    def signals_read(self, user_id: str, project_id: str, conversation_id: str, seen: str) -> bool:
        """An extraction read the thread as it was at ``seen`` (its ``signalsAt``): clear
        the stamp, unless a later turn stamped it again (or the thread is gone)."""
        try:
            self.client.update_item(
                TableName=self._table,
                Key=conversation_key(user_id, project_id, conversation_id),
                UpdateExpression="REMOVE #signalsAt, #waitUntil",
                ConditionExpression="#signalsAt = :seen",
                ExpressionAttributeNames={
                    "#signalsAt": "signalsAt",
                    "#waitUntil": "signalsWaitUntil",
                },
                ExpressionAttributeValues={":seen": to_value(seen)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise translate(exc) from exc
        return True

    def signals_wait(
        self, user_id: str, project_id: str, conversation_id: str, seen: str, until: str
    ) -> bool:
        """An extraction for the stamp ``seen`` was refused by the cooldown: turns with no
        signals of their own queue none for it before ``until`` (unless a later turn stamped
        the thread again, or the thread is gone)."""
        try:
            self.client.update_item(
                TableName=self._table,
                Key=conversation_key(user_id, project_id, conversation_id),
                UpdateExpression="SET #waitUntil = :until",
                ConditionExpression="#signalsAt = :seen",
                ExpressionAttributeNames={
                    "#signalsAt": "signalsAt",
                    "#waitUntil": "signalsWaitUntil",
                },
                ExpressionAttributeValues={":seen": to_value(seen), ":until": to_value(until)},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise translate(exc) from exc
        return True

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
                ConditionExpression=LIVE_THREAD,
                ExpressionAttributeNames={**LIVE_THREAD_NAMES, **names},
                ExpressionAttributeValues={name: to_value(value) for name, value in values.items()},
            )
        except ClientError as exc:
            raise missing_if_conflict(exc) from exc
