"""An export imported back into the project it came from: the import makes threads of its
own beside the originals, which it never touches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.conftest import Api
from tests.integration.test_export_and_import import MakeProject, import_done, say


def shown(api: Api, project: str, thread: str) -> dict[str, Any]:
    """A thread as GET answers it, but for its list group, which moves with the clock."""
    reply = api.get(f"/projects/{project}/conversations/{thread}")
    assert reply.status == 200, reply
    conversation = {k: v for k, v in reply.body["conversation"].items() if k != "period"}
    return {"conversation": conversation, "messages": reply.body["messages"]}


def test_an_export_imported_into_its_own_project_makes_new_threads_and_leaves_the_originals(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given a project with two threads, one of two turns, and its export
    project = make_project(alice)
    first = say(alice, project, "What colour should the header be?")["conversation"]["id"]
    say(alice, project, "And the footer?", first)
    second = say(alice, project, "Draft the spring newsletter")["conversation"]["id"]
    renamed = alice.patch(f"/projects/{project}/conversations/{second}", {"title": "Spring"})
    assert renamed.status == 200, renamed
    originals = {thread: shown(alice, project, thread) for thread in (first, second)}
    exported = alice.get(f"/projects/{project}/export")
    assert exported.status == 200, exported
    # When it is imported into the same project
    progress = import_done(alice, project, exported.body, drain)
    # Then each original reads as it did: title, counts, stamps and messages
    assert (progress["status"], progress["threadsDone"], progress["errors"]) == ("done", 2, [])
    for thread, before in originals.items():
        assert shown(alice, project, thread) == before
    # And both sets are listed, the imported threads under new ids
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    ids = {row["id"] for row in listed}
    assert len(listed) == 4 and set(originals) < ids
    copies = [shown(alice, project, thread) for thread in ids - set(originals)]
    # And each copy holds its original's title and messages, under ids of its own
    by_title = {before["conversation"]["title"]: before for before in originals.values()}
    assert sorted(copy["conversation"]["title"] for copy in copies) == sorted(by_title)
    for copy in copies:
        before = by_title[copy["conversation"]["title"]]
        assert [(m["role"], m["content"]) for m in copy["messages"]] == [
            (m["role"], m["content"]) for m in before["messages"]
        ]
        assert not {m["id"] for m in copy["messages"]} & {m["id"] for m in before["messages"]}
