"""A rename is a change to the thread like a turn: it moves the thread's ``updatedAt`` as
GET shows it, and its place in the list with it, over the embedded DynamoDB."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from recall.domain import clock
from tests.integration.conftest import Api
from tests.integration.test_conversations_api import MakeProject, start


class Clock:
    """Recall's clock, standing still until ``later`` moves it a second on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now: datetime = clock.now()
        monkeypatch.setattr(clock, "now", lambda: self.now)

    def later(self) -> str:
        self.now += timedelta(seconds=1)
        return clock.stamp(self.now)


def updated_at(api: Api, project: str, thread: str) -> str:
    reply = api.get(f"/projects/{project}/conversations/{thread}")
    assert reply.status == 200, reply
    stamp: str = reply.body["conversation"]["updatedAt"]
    return stamp


def listed(api: Api, project: str) -> list[tuple[str, str]]:
    rows = api.get(f"/projects/{project}/conversations").body["conversations"]
    return [(row["id"], row["updatedAt"]) for row in rows]


def test_a_rename_moves_the_threads_updated_at_and_its_place_in_the_list_as_a_turn_does(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three threads, each started a second after the one before
    time = Clock(monkeypatch)
    project = make_project(alice)
    started = {}
    for title in ("oldest", "middle", "newest"):
        at = time.later()
        started[title] = (start(alice, project, title)["id"], at)
    (oldest, _), (middle, _), (newest, newest_at) = started.values()
    # When the oldest is renamed a second later
    renamed_at = time.later()
    renamed = alice.patch(f"/projects/{project}/conversations/{oldest}", {"title": "Spring"})
    # Then GET and the list show it updated then, and the list puts it first
    assert renamed.status == 200, renamed
    assert updated_at(alice, project, oldest) == renamed.body["updatedAt"] == renamed_at
    assert listed(alice, project)[:2] == [(oldest, renamed_at), (newest, newest_at)]
    # And a turn a second later moves its thread the same way
    turned_at = time.later()
    body = {"message": "hello", "conversationId": middle}
    assert alice.post(f"/projects/{project}/chat", body).status == 200
    assert updated_at(alice, project, middle) == turned_at
    assert listed(alice, project) == [
        (middle, turned_at),
        (oldest, renamed_at),
        (newest, newest_at),
    ]
