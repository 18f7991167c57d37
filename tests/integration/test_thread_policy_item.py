"""A thread's preset prompts and rolling summary live on its policy item, beside the item
every turn rewrites: a turn on a thread from a large preset, with a full summary, writes what a
turn on a plain thread writes, and every read, list, delete and erasure takes both items
(or, for a thread saved before the split, finds them on its own item)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3

from recall.domain.presets import ContextPrompt, PresetCopy
from recall.settings import get_settings
from recall.store.conversation_items import POLICY_SUFFIX, ConversationItem
from recall.store.dynamodb import from_item, to_item
from recall.store.keys import owner_key
from recall.wiring import conversation_store
from tests.integration.conftest import Api
from tests.integration.test_turn_request_budget import turn_writes

MakeProject = Callable[..., str]

LARGE_PRESET: dict[str, Any] = {
    "name": "Brand voice",
    "contextPrompts": [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"{n} " + "x" * 1_997}
        for n in range(8)
    ],
}
SUMMARY = "\n".join(f"- point {n}: " + "y" * 185 for n in range(10))[:2_000]


def _items(user: str, project: str) -> dict[str, dict[str, Any]]:
    """Every item of the caller's threads in the project, by sort key."""
    found = boto3.client("dynamodb").query(
        TableName=get_settings().conversations_table,
        KeyConditionExpression="#owner = :owner",
        ExpressionAttributeNames={"#owner": "owner"},
        ExpressionAttributeValues={":owner": {"S": owner_key(user, project)}},
        ConsistentRead=True,
    )["Items"]
    return {str(from_item(item)["conversationId"]): from_item(item) for item in found}


def _thread(api: Api, project: str, preset: str | None = None) -> str:
    body = {"presetId": preset} if preset else {}
    reply = api.post(f"/projects/{project}/conversations", body)
    assert reply.status == 201, reply
    thread: str = reply.body["id"]
    return thread


def _large_preset(api: Api, project: str) -> str:
    reply = api.post(f"/projects/{project}/presets", LARGE_PRESET)
    assert reply.status == 201, reply
    preset: str = reply.body["id"]
    return preset


def _summarised(api: Api, project: str, thread: str) -> None:
    """The thread's summary at its full size, saved the way the summary job saves it."""
    store = conversation_store()
    conversation = store.get(api.sub or "", project, thread)
    assert conversation is not None and conversation.last_message_id is not None
    assert store.save_summary(conversation, SUMMARY, conversation.last_message_id)


def _beyond_messages(api: Api, project: str, thread: str, text: str) -> float:
    """A turn's write units beyond its new messages (written twice, in the transaction)."""
    turn = turn_writes(api, project, thread, text)
    return turn.units - 2 * turn.floor


def test_a_turn_on_a_thread_with_a_large_preset_and_summary_writes_what_a_plain_one_writes(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a plain thread, and a thread from a preset of 8 × 2,000-character prompts whose
    # summary holds 2,000 characters
    project = make_project(alice)
    plain = _thread(alice, project)
    large = _thread(alice, project, _large_preset(alice, project))
    for thread in (plain, large):
        reply = alice.post(f"/projects/{project}/chat", {"message": "hi", "conversationId": thread})
        assert reply.status == 200, reply
    _summarised(alice, project, large)
    preview = alice.get(f"/projects/{project}/conversations/{large}/context").body
    assert len(preview["contextPrompts"]) == 8
    assert "point 9" in preview["summary"]
    # When each takes a turn
    text = "what should the spring menu lead with?"
    on_plain = _beyond_messages(alice, project, plain, text)
    on_large = _beyond_messages(alice, project, large, text)
    # Then the large thread's turn writes no more beyond its messages than the plain one's
    assert on_large == on_plain


def test_the_policy_item_stays_out_of_lists_and_latest_and_goes_with_its_thread(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread from a preset, with a summary
    project = make_project(alice)
    user = alice.sub or ""
    thread = _thread(alice, project, _large_preset(alice, project))
    turn = alice.post(f"/projects/{project}/chat", {"message": "hi", "conversationId": thread})
    assert turn.status == 200, turn
    _summarised(alice, project, thread)
    items = _items(user, project)
    # Then its item keeps the preset's name, its policy item the prompts and the summary
    assert set(items) == {thread, thread + POLICY_SUFFIX}
    assert not {"summary", "summaryThrough"} & set(items[thread])
    assert items[thread]["preset"]["name"] == "Brand voice"
    assert "contextPrompts" not in items[thread]["preset"]
    policy = items[thread + POLICY_SUFFIX]
    assert {"contextPrompts", "summary", "summaryThrough"} <= set(policy)
    # and the list, the latest thread and the thread itself show it once, whole
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    assert [row["id"] for row in listed] == [thread]
    assert listed[0]["presetName"] == "Brand voice"
    latest = alice.post(
        f"/projects/{project}/chat", {"message": "again", "conversationId": "latest"}
    )
    assert latest.body["conversation"]["id"] == thread
    assert alice.get(f"/projects/{project}/conversations/{thread}").body["conversation"][
        "presetName"
    ] == ("Brand voice")
    # When the context is cleared, the summary goes and the prompts stay
    cleared = alice.post(f"/projects/{project}/conversations/{thread}/clear-context", {})
    assert cleared.status in (200, 204), cleared
    policy = _items(user, project)[thread + POLICY_SUFFIX]
    assert "summary" not in policy and len(policy["contextPrompts"]) == 8
    # When it is deleted, both items go
    assert alice.delete(f"/projects/{project}/conversations/{thread}").status == 204
    assert _items(user, project) == {}


def test_an_erasure_takes_the_policy_items_even_one_left_alone(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given bob's thread from a preset, and a policy item whose thread's item is gone
    project = make_project(alice, {bob: "editor"})
    user = bob.sub or ""
    preset = _large_preset(alice, project)
    _thread(bob, project, preset)
    alone = _thread(bob, project, preset)
    boto3.client("dynamodb").delete_item(
        TableName=get_settings().conversations_table,
        Key=to_item({"owner": owner_key(user, project), "conversationId": alone}),
    )
    assert len(_items(user, project)) == 3
    # When bob erases himself from the project
    assert bob.delete(f"/projects/{project}/me").status == 204
    # Then nothing of his threads is left
    assert _items(user, project) == {}


def test_a_thread_saved_before_the_split_keeps_its_preset_and_summary_on_its_own_item(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread stored as it was before policy items: preset and summary on its item
    project = make_project(alice)
    user = alice.sub or ""
    thread = _thread(alice, project)
    assert (
        alice.post(f"/projects/{project}/chat", {"message": "hi", "conversationId": thread}).status
        == 200
    )
    current = conversation_store().get(user, project, thread)
    assert current is not None and current.last_message_id is not None
    older = current.model_copy(
        update={
            "preset": PresetCopy(
                preset_id="01OLDPRESET000000000000000",
                name="Old voice",
                context_prompts=[ContextPrompt(role="user", content="Speak like a sailor.")],
            ),
            "summary": "- they sell candles",
            "summary_through": current.last_message_id,
        }
    )
    record = ConversationItem(
        **older.model_dump(), owner=owner_key(user, project), recency="L#" + older.updated_at
    )
    boto3.client("dynamodb").put_item(
        TableName=get_settings().conversations_table,
        Item=to_item(record.model_dump(by_alias=True, exclude={"user_id", "project_id"})),
    )
    # When it is read, previewed and chatted on
    shown = alice.get(f"/projects/{project}/conversations/{thread}").body
    preview = alice.get(f"/projects/{project}/conversations/{thread}/context").body
    turn = alice.post(f"/projects/{project}/chat", {"message": "and?", "conversationId": thread})
    # Then its preset and summary count as before
    assert shown["conversation"]["presetName"] == "Old voice"
    assert [prompt["content"] for prompt in preview["contextPrompts"]] == ["Speak like a sailor."]
    assert "they sell candles" in preview["summary"]
    assert turn.status == 200, turn
    # When the summary job next saves its summary, it moves to the policy item
    read = conversation_store().get(user, project, thread)
    assert read is not None and read.last_message_id is not None
    assert read.summary == "- they sell candles"
    assert conversation_store().save_summary(read, "- candles, from Lisbon", read.last_message_id)
    items = _items(user, project)
    assert "summary" not in items[thread]
    assert items[thread + POLICY_SUFFIX]["summary"] == "- candles, from Lisbon"
    again = conversation_store().get(user, project, thread)
    assert again is not None and again.summary == "- candles, from Lisbon"
    assert again.preset is not None and again.preset.name == "Old voice"
    # and a job that read the older summary finds it changed
    assert not conversation_store().save_summary(read, "- stale", read.last_message_id)
