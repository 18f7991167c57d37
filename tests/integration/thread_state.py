"""Set what turns move on a thread where it is kept: on the member's latest usage item
while the thread is their active one, else on the thread's item. Tests that stage a
thread's state by hand go through here, so they stage what readers and turns read."""

from __future__ import annotations

from typing import Any

from recall.settings import get_settings
from recall.store.conversation_items import conversation_key
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import dynamodb_client, from_item, to_value
from recall.store.usage import UsageStore, active_from


def set_moved(user_id: str, project_id: str, conversation_id: str, **values: Any) -> None:
    """``values`` by attribute name (``lastMessageId``, ``turnCount``…)."""
    settings = get_settings()
    client = dynamodb_client()
    usage = UsageStore(settings, client)
    found = client.query(**usage.latest_request(user_id, project_id))["Items"]
    latest = from_item(found[0]) if found else {}
    if latest.get("active", {}).get("conversationId") == conversation_id:
        key = {"owner": found[0]["owner"], "period": found[0]["period"]}
        table = settings.usage_table
        names = {"#active": "active", **{f"#a{n}": name for n, name in enumerate(values)}}
        expression = ", ".join(f"#active.#a{n} = :a{n}" for n in range(len(values)))
    else:
        key = conversation_key(user_id, project_id, conversation_id)
        table = settings.conversations_table
        names = {f"#a{n}": name for n, name in enumerate(values)}
        expression = ", ".join(f"#a{n} = :a{n}" for n in range(len(values)))
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET " + expression,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={f":a{n}": to_value(v) for n, v in enumerate(values.values())},
    )


def settle(user_id: str, project_id: str, conversation_id: str) -> None:
    """Make the thread's item hold what its turns moved, as when the member turns to
    another thread, and the member's usage item name no active thread: a thread as code
    from before active threads left it, for tests that stage such a thread by hand."""
    settings = get_settings()
    client = dynamodb_client()
    usage = UsageStore(settings, client)
    found = client.query(**usage.latest_request(user_id, project_id))["Items"]
    if not found:
        return
    active = active_from(from_item(found[0]))
    if active is None or active.conversation_id != conversation_id:
        return
    client.update_item(
        **ConversationStore(settings, client).left_request(
            user_id, project_id, active, placed=False
        )
    )
    client.update_item(
        TableName=settings.usage_table,
        Key={"owner": found[0]["owner"], "period": found[0]["period"]},
        UpdateExpression="REMOVE active",
    )
