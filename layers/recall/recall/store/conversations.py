"""The Conversations table: a thread's item under ``owner = <userId>#<projectId>``, and
beside it, at ``<conversationId>#policy``, its policy item: its preset copy's context
prompts and its rolling summary.

Every turn rewrites the thread's item, and DynamoDB bills a write by the larger of the
item before and after it (twice in a transaction), so what is large and changes rarely
(up to ``CONTEXT_PROMPTS_MAX`` × ``CONTEXT_PROMPT_MAX_CHARS`` of prompts,
``SUMMARY_MAX_CHARS`` of summary) lives on the policy item, which only thread creation,
the summary job and a clear write; reads of one thread take both items together. A thread
saved before the split keeps its prompts and summary on its own item: they are read from
there until the policy item has its own (the summary job moves the summary over).

The ``byRecency`` index sorts a caller's threads by ``recency``
(``L#<updatedAt>#<id>`` live, ``A#…`` archived, ``D#…`` being deleted), so the newest
page of either list is one query and a thread being deleted drops out of both. A policy
item has no ``recency``, so the index never holds it. The items' keys and shapes are
``recall.store.conversation_items``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic.alias_generators import to_camel

from recall.domain.conversations import Conversation
from recall.domain.presets import SettingsChange, ThreadSettings
from recall.errors import Conflict, Forbidden, Invalid, NotFound
from recall.settings import Settings
from recall.store.conversation_items import (
    ARCHIVED,
    BY_RECENCY,
    DELETING,
    LIVE,
    POLICY_SUFFIX,
    conversation_from,
    conversation_item,
    conversation_key,
    is_policy,
    policy_item,
    policy_key,
    recency,
    thread_from,
    thread_keys,
)
from recall.store.cursors import (
    decode_cursor,
    encode_cursor,
    list_tag,
)
from recall.store.dynamodb import (
    Item,
    batch_get,
    cancellation_codes,
    collided,
    dynamodb_client,
    error_code,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import owner_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_LIVE = "attribute_exists(#sk) AND attribute_not_exists(#deleting)"
_LIVE_NAMES = {"#sk": "conversationId", "#deleting": "deleting"}
_FAILED = "ConditionalCheckFailed"


@dataclass
class _Clauses:
    """One UpdateItem's clauses, with only the names and values they use (DynamoDB refuses
    a request that sends any other)."""

    names: dict[str, str]
    values: dict[str, Any]
    assignments: list[str]
    conditions: list[str]
    removals: list[str] = field(default_factory=list)

    def request(self) -> dict[str, Any]:
        expression = "SET " + ", ".join(self.assignments)
        if self.removals:
            expression += " REMOVE " + ", ".join(self.removals)
        return {
            "UpdateExpression": expression,
            "ConditionExpression": " AND ".join(self.conditions),
            "ExpressionAttributeNames": self.names,
            "ExpressionAttributeValues": {
                name: to_value(value) for name, value in self.values.items()
            },
        }


def _merge_settings(seen: Conversation, changes: dict[str, Any], update: _Clauses) -> None:
    """Each setting a PATCH names set or, null, removed inside the stored map, which the
    write requires to exist. A thread read without overrides gets the map whole, only while
    it still has none (or an empty one): one made meanwhile is merged into on the retry. A
    null on a thread without overrides has nothing to remove."""
    if not changes:
        return
    given = ThreadSettings.model_validate(changes)
    whole = given.model_dump(by_alias=True, exclude_none=True)
    if seen.settings is None and not whole:
        return
    update.names["#settings"] = "settings"
    if seen.settings is None:
        update.values.update({":settings": whole, ":nothing": 0})
        update.assignments.append("#settings = :settings")
        update.conditions.append("(attribute_not_exists(#settings) OR size(#settings) = :nothing)")
        return
    update.conditions.append("attribute_exists(#settings)")
    for index, name in enumerate(changes):
        update.names[f"#setting{index}"] = to_camel(name)
        value = getattr(given, name)
        if value is None:
            update.removals.append(f"#settings.#setting{index}")
        else:
            update.values[f":setting{index}"] = value
            update.assignments.append(f"#settings.#setting{index} = :setting{index}")


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
            if guard is not None and codes[-1:] == [_FAILED] and _FAILED not in codes[:-1]:
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
            "ConditionExpression": _LIVE,
            "ExpressionAttributeNames": _LIVE_NAMES,
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

    def update(
        self,
        seen: Conversation,
        at: str,
        *,
        title: str | None,
        archived: bool | None,
        settings: SettingsChange,
    ) -> Conversation:
        """A PATCH: writes only what it names, so PATCHes of different parts racing each
        other both land. The title and the archive flag are set by themselves; settings are
        merged key by key into the overrides as stored, not as read (or, when the thread
        had none, put whole if it still has none). ``updatedAt`` moves to ``at``, never
        back past a later one a turn or PATCH wrote meanwhile, and ``recency`` with it,
        under the flag this PATCH sets or, naming none, the flag ``seen`` (and the
        write's condition) holds. Never touches ``lastMessageId``: a racing turn still
        saves.
        Conflict when the thread changed in a way this depends on: read it and try again.
        Returns the thread as written, its policy item's parts as ``seen``."""
        flag = seen.archived if archived is None else archived
        update = _Clauses(
            names={**_LIVE_NAMES, "#updatedAt": "updatedAt", "#recency": "recency"},
            values={":at": at, ":recency": recency(flag, at, seen.conversation_id)},
            assignments=["#updatedAt = :at", "#recency = :recency"],
            conditions=[_LIVE, "#updatedAt <= :at"],
        )
        update.names["#archived"] = "archived"
        update.values[":archived"] = flag
        if archived is None:
            update.conditions.append("#archived = :archived")
        else:
            update.assignments.append("#archived = :archived")
        if title is not None:
            update.names["#title"] = "title"
            update.values[":title"] = title
            update.assignments.append("#title = :title")
        if settings is None:
            update.names["#settings"] = "settings"
            update.removals.append("#settings")
        elif isinstance(settings, dict):
            _merge_settings(seen, settings, update)
        try:
            written = self.client.update_item(
                TableName=self._table,
                Key=conversation_key(seen.user_id, seen.project_id, seen.conversation_id),
                ReturnValues="ALL_NEW",
                **update.request(),
            )
        except ClientError as exc:
            raise translate(exc, "The conversation changed meanwhile.") from exc
        thread = conversation_from(written["Attributes"])
        if thread is None:
            raise NotFound("No such conversation.")
        return thread.model_copy(
            update={
                "preset": seen.preset,
                "summary": seen.summary,
                "summary_through": seen.summary_through,
            }
        )

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
            **_LIVE_NAMES,
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
            "ConditionExpression": f"{_LIVE} AND #archived = :archived AND {seen}",
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
            "ConditionExpression": _LIVE,
            "ExpressionAttributeNames": {**_LIVE_NAMES, **summary, "#clearedAfter": "clearedAfter"},
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
            raise _missing_if_conflict(exc) from exc

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
        period = {**_LIVE_NAMES, "#clearedAfter": "clearedAfter"}
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
            "ConditionExpression": f"{_LIVE} AND {cleared} AND {seen}",
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


def _missing_if_conflict(exc: ClientError) -> Exception:
    """A failed ``attribute_exists`` is a thread that is not there; a write that only met
    another transaction (a turn saving on the thread) is a ``Conflict`` to try again."""
    error = translate(exc)
    if isinstance(error, Conflict) and not collided(exc):
        return NotFound("No such conversation.")
    return error
