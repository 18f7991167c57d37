"""A thread's PATCH: one conditional update that writes only what the PATCH names, so
PATCHes of different parts racing each other both land (``ConversationPatch.update``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError
from pydantic.alias_generators import to_camel

from recall.domain.conversations import Conversation
from recall.domain.presets import SettingsChange, ThreadSettings
from recall.errors import NotFound
from recall.store.conversation_items import conversation_from, conversation_key, recency
from recall.store.conversation_table import LIVE_THREAD, LIVE_THREAD_NAMES, ConversationTable
from recall.store.dynamodb import to_value, translate


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


class ConversationPatch(ConversationTable):
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
            names={**LIVE_THREAD_NAMES, "#updatedAt": "updatedAt", "#recency": "recency"},
            values={":at": at, ":recency": recency(flag, at, seen.conversation_id)},
            assignments=["#updatedAt = :at", "#recency = :recency"],
            conditions=[LIVE_THREAD, "#updatedAt <= :at"],
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
