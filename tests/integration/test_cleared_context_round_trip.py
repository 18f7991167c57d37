"""A thread's clear-context marker goes out in the export and comes back on import, so
the model never again sees what the user cleared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.conftest import Api

MakeProject = Callable[..., str]


def say(api: Api, project: str, message: str, conversation: str | None = None) -> str:
    body: dict[str, Any] = {"message": message}
    if conversation:
        body["conversationId"] = conversation
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    conversation_id: str = reply.body["conversation"]["id"]
    return conversation_id


def window(api: Api, project: str, conversation: str) -> list[str]:
    reply = api.get(f"/projects/{project}/conversations/{conversation}/context")
    assert reply.status == 200, reply
    return [message["content"] for message in reply.body["window"]]


def test_an_imported_thread_starts_its_window_after_the_same_message_as_the_exported_one(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: a thread cleared after its first turn, then one more turn
    source = make_project(alice)
    chat = say(alice, source, "my card number is 4111")
    say(alice, source, "and the expiry is 12/29", chat)
    cleared = alice.post(f"/projects/{source}/conversations/{chat}/clear-context")
    assert cleared.status == 200, cleared
    say(alice, source, "Plan the spring newsletter", chat)
    before = window(alice, source, chat)
    exported = alice.get(f"/projects/{source}/export").body
    # When
    target = make_project(alice)
    started = alice.post(f"/projects/{target}/import", exported)
    assert started.status == 202, started
    drain()
    imported = alice.get(f"/projects/{target}/conversations").body["conversations"][0]
    again = alice.get(f"/projects/{target}/export").body["conversations"][0]
    # Then
    assert exported["conversations"][0]["clearedAfter"] == cleared.body["clearedAfter"]
    assert len(before) == 2 and before[0] == "Plan the spring newsletter"
    assert window(alice, target, imported["id"]) == before
    assert "4111" not in str(window(alice, target, imported["id"]))
    marker = exported["conversations"][0]["clearedAfter"]
    hidden = [m for m in exported["conversations"][0]["messages"] if m["id"] <= marker]
    assert [m["id"] for m in again["messages"]].index(again["clearedAfter"]) == len(hidden) - 1
    assert len(hidden) >= 4


def test_a_thread_never_cleared_exports_without_the_marker(
    alice: Api, make_project: MakeProject
) -> None:
    # Given
    project = make_project(alice)
    say(alice, project, "hello")
    # When
    exported = alice.get(f"/projects/{project}/export").body
    # Then
    assert "clearedAfter" not in exported["conversations"][0]
