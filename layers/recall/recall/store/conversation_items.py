"""The Conversations table's items: a thread's key, its item and its policy item, and
what turns them back into a thread. Only the thread store and the turn's save (which
writes a thread inside its own transaction) build these.

A thread's item sits under ``owner = <userId>#<projectId>``; its policy item, at
``<conversationId>#policy``, holds what is large and changes rarely (the preset copy's
context prompts and the rolling summary). The ``byRecency`` index sorts a caller's threads
by ``recency`` (``L#<updatedAt>#<id>`` live, ``A#…`` archived, ``D#…`` being deleted).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from recall.domain.conversations import Conversation
from recall.store.dynamodb import Item, from_item, to_item
from recall.store.keys import owner_key, owner_parts

BY_RECENCY = "byRecency"
LIVE = "L#"
ARCHIVED = "A#"
DELETING = "D#"


POLICY_SUFFIX = "#policy"
# What grows on a thread and changes rarely, kept on its policy item: the preset copy's
# context prompts (its id, name and settings are small and stay, so lists show them) and
# the rolling summary.
PROMPTS = "contextPrompts"
SUMMARY_FIELDS = {"summary": "summary", "summary_through": "summaryThrough"}


def conversation_key(user_id: str, project_id: str, conversation_id: str) -> Item:
    return to_item({"owner": owner_key(user_id, project_id), "conversationId": conversation_id})


def policy_key(user_id: str, project_id: str, conversation_id: str) -> Item:
    """The thread's policy item: ids hold no ``#``, so no thread has this key."""
    return conversation_key(user_id, project_id, conversation_id + POLICY_SUFFIX)


def thread_keys(user_id: str, project_id: str, conversation_id: str) -> list[Item]:
    """Both items of a thread, for a read that takes it whole."""
    return [
        conversation_key(user_id, project_id, conversation_id),
        policy_key(user_id, project_id, conversation_id),
    ]


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
    """The item a turn rewrites: everything but the policy item's fields."""
    record = ConversationItem(
        **conversation.model_dump(),
        owner=owner_key(conversation.user_id, conversation.project_id),
        recency=recency(
            conversation.archived, conversation.updated_at, conversation.conversation_id
        ),
    )
    return to_item(
        record.model_dump(
            by_alias=True,
            exclude={
                "user_id": True,
                "project_id": True,
                **dict.fromkeys(SUMMARY_FIELDS, True),
                "preset": {"context_prompts": True},
            },
        )
    )


def policy_item(conversation: Conversation) -> Item | None:
    """The thread's policy item, or ``None`` when it has no context prompts nor summary."""
    values: dict[str, Any] = {
        name: value
        for field, name in SUMMARY_FIELDS.items()
        if (value := getattr(conversation, field))
    }
    preset = conversation.preset
    if preset is not None and preset.context_prompts:
        values[PROMPTS] = [prompt.model_dump(by_alias=True) for prompt in preset.context_prompts]
    if not values:
        return None
    return to_item(
        {
            "owner": owner_key(conversation.user_id, conversation.project_id),
            "conversationId": conversation.conversation_id + POLICY_SUFFIX,
            **values,
        }
    )


def is_policy(values: dict[str, Any]) -> bool:
    return str(values["conversationId"]).endswith(POLICY_SUFFIX)


def conversation_from(item: Item, policy: Item | None = None) -> Conversation | None:
    """``None`` for a thread that is being deleted: to callers it is already gone. What
    its policy item holds wins over what an older item kept itself. An empty ``settings``
    map reads as no overrides."""
    values = from_item(item)
    if values.get("deleting"):
        return None
    if values.get("settings") == {}:
        # Every override stopped one by one: the thread follows, as one that never had any.
        del values["settings"]
    if policy is not None:
        kept = from_item(policy)
        values.update({name: kept[name] for name in SUMMARY_FIELDS.values() if name in kept})
        if PROMPTS in kept and values.get("preset"):
            values["preset"] = {**values["preset"], PROMPTS: kept[PROMPTS]}
    user_id, project_id = owner_parts(values["owner"])
    record = ConversationItem.model_validate({**values, "userId": user_id, "projectId": project_id})
    return Conversation.model_validate(record.model_dump(exclude={"owner", "recency", "deleting"}))


def thread_from(items: list[Item]) -> Conversation | None:
    """The thread from its items as a read found them (either, both or none)."""
    main = [item for item in items if not is_policy(from_item(item))]
    policy = [item for item in items if is_policy(from_item(item))]
    if not main:
        return None
    return conversation_from(main[0], policy[0] if policy else None)
