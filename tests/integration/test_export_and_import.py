"""Export and import through the real handlers over the embedded DynamoDB, the import's
chunks run by the worker from the queue, as Lambda's event source would run them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
import json
from typing import Any

from botocore.exceptions import ClientError
import pytest

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.jobs import ImportJob
from recall.domain.prompt import ModelError, ModelReply, ModelRequest
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client
from recall.store.imports import chunk_sk, import_key, progress_sk
from recall.store.jobs import sqs_client
from recall.wiring import (
    conversation_store,
    data_service,
    import_store,
    job_runner,
    message_store,
    model_choice,
)
from tests.integration.conftest import Api
from tests.integration.fault_injection import ALWAYS, QUEUE_THROTTLED, injected, no_backoff_sleep

MakeProject = Callable[..., str]


@pytest.fixture
def small_settings() -> Iterator[Callable[..., None]]:
    """Tighter limits on the wired data service, restored afterwards."""
    service = data_service()
    original = service._settings

    def use(**changes: Any) -> None:
        service._settings = original.model_copy(update=changes)

    yield use
    service._settings = original


class Failing:
    """A model that fails every turn, as Bedrock's 5xx does."""

    def converse(self, request: ModelRequest) -> ModelReply:
        raise ModelError("Bedrock failed (InternalServerException)")


def say(api: Api, project: str, message: str, conversation: str | None = None) -> Any:
    body: dict[str, Any] = {"message": message}
    if conversation:
        body["conversationId"] = conversation
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    return reply.body


def ago(**delta: float) -> str:
    return clock.stamp(clock.now() - timedelta(**delta))


def earlier_today() -> str:
    """Five minutes ago, or half way back to midnight when that is nearer: a time that is
    today whenever the test runs (five minutes ago was yesterday just after midnight)."""
    now = clock.now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return clock.stamp(max(now - timedelta(minutes=5), midnight + (now - midnight) / 2))


def thread(title: str, *contents: str, at: str | None = None) -> dict[str, Any]:
    start = clock.parse(at or ago(hours=1))
    return {
        "title": title,
        "messages": [
            {
                "role": "user" if number % 2 == 0 else "assistant",
                "content": content,
                "createdAt": clock.stamp(start + timedelta(seconds=number)),
            }
            for number, content in enumerate(contents)
        ],
    }


def import_done(api: Api, project: str, document: Any, drain: Callable[[], None]) -> Any:
    started = api.post(f"/projects/{project}/import", document)
    assert started.status == 202, started
    drain()
    progress = api.get(started.headers["Location"])
    assert progress.status == 200, progress
    return progress.body


def without_ids(document: dict[str, Any]) -> dict[str, Any]:
    """The export as the round trip keeps it: not its ids, its own stamps or project, nor
    what an import changes by design (memory's source, its `imported` record)."""
    place = {thread["id"]: n for n, thread in enumerate(document["conversations"])}
    return {
        "conversations": [
            {
                **{key: value for key, value in thread.items() if key != "id"},
                "messages": [
                    {key: value for key, value in message.items() if key != "id"}
                    for message in thread["messages"]
                ],
            }
            for thread in document["conversations"]
        ],
        "memories": [
            {
                **{key: value for key, value in memory.items() if key not in {"source", "history"}},
                "conversationId": place.get(memory.get("conversationId") or ""),
                "history": [
                    record for record in memory["history"] if record["source"] != "imported"
                ],
            }
            for memory in document["memories"]
        ],
    }


def test_a_project_exported_imported_and_exported_again_is_the_same_document(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: threads with tool calls, an archived one, memory of both scopes with history
    source = make_project(alice)
    first = say(alice, source, "Always keep the header dark")
    chat = first["conversation"]["id"]
    say(alice, source, "Never use rounded buttons", chat)
    model_choice().use(Failing())
    try:
        failed = alice.post(
            f"/projects/{source}/chat", {"message": "Still there?", "conversationId": chat}
        )
    finally:
        model_choice().use(None)
    assert failed.status == 502, failed
    other = say(alice, source, "Draft the spring newsletter")["conversation"]["id"]
    assert (
        alice.patch(f"/projects/{source}/conversations/{other}", {"archived": True}).status == 200
    )
    alice.put(f"/projects/{source}/memories/tone", {"value": "warm", "category": "brand"})
    alice.put(f"/projects/{source}/memories/tone", {"value": "warm, brief", "category": "brand"})
    thread_entry = {"value": "spring only", "category": "context", "scope": "thread"}
    alice.put(f"/projects/{source}/memories/season", {**thread_entry, "conversationId": chat})
    exported = alice.get(f"/projects/{source}/export")
    assert exported.status == 200, exported
    messages = [m for t in exported.body["conversations"] for m in t["messages"]]
    assert any(m["toolCalls"] for m in messages) and any(m["toolResults"] for m in messages)
    assert any(m["status"] == "error" and m["error"] for m in messages)
    tone = next(m for m in exported.body["memories"] if m["key"] == "tone")
    assert [(r["action"], r["newValue"]) for r in tone["history"]] == [
        ("created", "warm"),
        ("updated", "warm, brief"),
    ]
    # When
    target = make_project(alice)
    progress = import_done(alice, target, exported.body, drain)
    again = alice.get(f"/projects/{target}/export")
    # Then
    assert progress["status"] == "done", progress
    assert progress["threadsDone"] == progress["threadsTotal"] == 2
    assert progress["memoriesDone"] == len(exported.body["memories"]) == 4
    assert progress["errors"] == []
    assert without_ids(again.body) == without_ids(exported.body)
    assert {memory["source"] for memory in again.body["memories"]} == {"imported"}


def test_the_same_document_imported_twice_creates_nothing_twice(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given
    project = make_project(alice)
    document = {"format": "threads", "threads": [thread("One", "a", "b"), thread("Two", "c")]}
    first = import_done(alice, project, document, drain)
    # When: sent again, and its chunk delivered again
    second = alice.post(f"/projects/{project}/import", document)
    job_runner().run(
        ImportJob(user_id=alice.sub, project_id=project, import_id=first["id"], chunk=0)
    )
    drain()
    # Then
    assert second.status == 202 and second.body["id"] == first["id"]
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    assert sorted(row["title"] for row in listed) == ["One", "Two"]
    assert alice.get(f"/projects/{project}/import/{first['id']}").body == first
    assert (first["threadsDone"], first["messagesDone"]) == (2, 3)


def test_imported_threads_keep_their_order_and_stamps_and_group_by_their_own_time(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given
    project = make_project(alice)
    old = ago(days=40)
    document = {
        "format": "threads",
        "threads": [
            thread("Last month", "first", "second", "third", at=old),
            thread("This week", "hello", at=ago(days=3)),
            thread("Today", "hi", at=earlier_today()),
        ],
    }
    # When
    import_done(alice, project, document, drain)
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    oldest = next(row for row in listed if row["title"] == "Last month")
    messages = alice.get(f"/projects/{project}/conversations/{oldest['id']}").body["messages"]
    # Then
    assert [(row["title"], row["period"]) for row in listed] == [
        ("Today", "today"),
        ("This week", "previous7Days"),
        ("Last month", "older"),
    ]
    assert [m["content"] for m in messages] == ["first", "second", "third"]
    assert messages[0]["createdAt"] == oldest["createdAt"] == old
    assert (oldest["messageCount"], oldest["turnCount"]) == (3, 2)


def test_the_first_turn_on_an_imported_thread_sees_its_history(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given
    project = make_project(alice)
    words = [f"imported line {n}" for n in range(30)]
    import_done(alice, project, {"format": "threads", "threads": [thread("Old", *words)]}, drain)
    imported = alice.get(f"/projects/{project}/conversations").body["conversations"][0]["id"]
    # When
    turn = say(alice, project, "Where were we?", imported)
    context = alice.get(f"/projects/{project}/conversations/{imported}/context")
    # Then
    assert turn["conversation"]["id"] == imported
    assert context.status == 200, context
    shown = str(context.body)
    assert "imported line 29" in shown and "Where were we?" in shown


def test_errors_name_the_thread_and_message_and_nothing_is_started(
    alice: Api, make_project: MakeProject
) -> None:
    # Given
    project = make_project(alice)
    bad = thread("Bad", "a", "b", "c")
    bad["messages"][2]["createdAt"] = "yesterday"
    future = thread("Future", "a", at=clock.stamp(clock.now() + timedelta(days=2)))
    # When
    reply = alice.post(
        f"/projects/{project}/import",
        {"format": "threads", "threads": [thread("Good", "a"), bad, future]},
    )
    shape = alice.post(
        f"/projects/{project}/import",
        {"format": "threads", "threads": [thread("Good", "a"), {"messages": [{"role": "x"}]}]},
    )
    # Then
    assert reply.status == 422, reply
    fields = [detail["field"] for detail in reply.body["error"]["details"]]
    assert fields == ["threads.1.messages.2.createdAt", "threads.2.messages.0.createdAt"]
    assert shape.status == 422, shape
    assert any(".1.messages.0." in detail["field"] for detail in shape.body["error"]["details"])
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_an_import_over_its_limits_is_refused_up_front(
    alice: Api, make_project: MakeProject, small_settings: Callable[..., None]
) -> None:
    # Given
    project = make_project(alice)
    small_settings(import_threads_max=2, import_messages_per_thread_max=2)
    # When
    many = alice.post(
        f"/projects/{project}/import",
        {"format": "threads", "threads": [thread(str(n), "a") for n in range(3)]},
    )
    long = alice.post(
        f"/projects/{project}/import",
        {"format": "threads", "threads": [thread("L", "a", "b", "c")]},
    )
    # Then
    assert many.status == 422 and many.body["error"]["details"][0]["field"] == "threads"
    assert long.status == 422 and long.body["error"]["details"][0]["field"] == "threads.0.messages"


def test_a_large_import_is_cut_into_chunks_whose_progress_adds_up(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given: chunks of 2 KB, so a 40-message thread spans several
    project = make_project(alice)
    small_settings(import_chunk_max_bytes=2_000)
    threads = [thread(f"T{n}", *[f"message {n}.{m}" for m in range(40)]) for n in range(5)]
    # When
    progress = import_done(alice, project, {"format": "threads", "threads": threads}, drain)
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    one = alice.get(f"/projects/{project}/conversations/{listed[0]['id']}", query="limit=200")
    # Then
    assert progress["status"] == "done"
    assert (progress["threadsDone"], progress["messagesDone"]) == (5, 200)
    assert len(listed) == 5
    assert [m["content"] for m in one.body["messages"]] == [
        f"message {listed[0]['title'][1:]}.{m}" for m in range(40)
    ]


def test_imported_memory_never_replaces_an_explicit_entry(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given
    project = make_project(alice)
    alice.put(f"/projects/{project}/memories/tone", {"value": "formal", "category": "brand"})
    document = alice.get(f"/projects/{project}/export").body
    document["memories"][0]["value"] = "casual"
    document["memories"].append({**document["memories"][0], "key": "palette", "value": "navy"})
    # When
    progress = import_done(alice, project, document, drain)
    memories = alice.get(f"/projects/{project}/memories").body["memories"]
    # Then
    assert {(m["key"], m["value"], m["source"]) for m in memories} == {
        ("tone", "formal", "explicit"),
        ("palette", "navy", "imported"),
    }
    assert progress["memoriesDone"] == 1
    assert len(progress["errors"]) == 1 and "'tone'" in progress["errors"][0]


def test_a_viewer_cannot_import_and_a_stranger_cannot_export(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject
) -> None:
    # Given
    project = make_project(alice, {bob: "viewer"})
    document = {"format": "threads", "threads": [thread("One", "a")]}
    # When
    imported = bob.post(f"/projects/{project}/import", document)
    exported = carol.get(f"/projects/{project}/export")
    viewer_export = bob.get(f"/projects/{project}/export")
    # Then
    assert imported.status == 403, imported
    assert exported.status == 403, exported
    assert viewer_export.status == 200, viewer_export


def test_each_member_exports_only_their_own_and_only_owners_get_the_project(
    alice: Api, bob: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: two users in two projects
    shared = make_project(alice, {bob: "editor"}, currency="EUR")
    elsewhere = make_project(alice)
    say(alice, shared, "Alice's plan")
    say(bob, shared, "Bob's plan")
    say(alice, elsewhere, "Another project")
    bob.put(f"/projects/{shared}/memories/bobs", {"value": "bob only", "category": "context"})
    # When
    mine = alice.get(f"/projects/{shared}/export").body
    theirs = bob.get(f"/projects/{shared}/export").body
    # Then
    assert [t["title"] for t in mine["conversations"]] == ["Alice's plan"]
    assert [t["title"] for t in theirs["conversations"]] == ["Bob's plan"]
    assert [m["key"] for m in mine["memories"]] == []
    assert [m["key"] for m in theirs["memories"]] == ["bobs"]
    assert mine["project"]["context"] == {"currency": "EUR"}
    assert {(m["userId"], m["role"]) for m in mine["project"]["members"]} == {
        (alice.sub, "owner"),
        (bob.sub, "editor"),
    }
    assert "project" not in theirs or theirs["project"] is None
    assert (mine["format"], mine["version"], mine["userId"]) == ("recall.export", 2, alice.sub)


def test_someone_elses_import_is_not_found(alice: Api, bob: Api, make_project: MakeProject) -> None:
    # Given
    project = make_project(alice, {bob: "editor"})
    started = alice.post(
        f"/projects/{project}/import", {"format": "threads", "threads": [thread("A", "a")]}
    )
    # When
    peek = bob.get(started.headers["Location"])
    nonsense = alice.get(f"/projects/{project}/import/{'x' * 2000}")
    # Then
    assert peek.status == 404, peek
    assert nonsense.status == 404, nonsense


def test_an_import_body_may_be_larger_than_other_requests(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: over REQUEST_BODY_MAX_BYTES, under IMPORT_MAX_BYTES
    project = make_project(alice)
    long = "y" * 10_000
    document = {"format": "threads", "threads": [thread(f"T{n}", long, long) for n in range(20)]}
    assert len(str(document)) > get_settings().request_body_max_bytes
    # When
    progress = import_done(alice, project, document, drain)
    # Then
    assert progress["status"] == "done" and progress["messagesDone"] == 40


def test_an_import_body_over_its_own_limit_is_a_413(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given
    project = make_project(alice)
    tight = get_settings().model_copy(update={"import_max_bytes": 1_000})
    monkeypatch.setattr("recall.api.http.get_settings", lambda: tight)
    document = {"format": "threads", "threads": [thread("Big", "z" * 2_000)]}
    # When
    reply = alice.post(f"/projects/{project}/import", document)
    # Then
    assert reply.status == 413, reply
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_an_import_body_counts_its_quotes_as_the_event_carries_them(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: a document under IMPORT_MAX_BYTES as a file, but not as API Gateway's event
    # holds it, where each of its escaped quotes (\") is escaped again (\\\")
    project = make_project(alice)
    tight = get_settings().model_copy(update={"import_max_bytes": 1_000})
    monkeypatch.setattr("recall.api.http.get_settings", lambda: tight)
    document = {"format": "threads", "threads": [thread("Quoted", '"' * 300)]}
    sent = json.dumps(document).encode()
    assert len(sent) < 1_000 < len(json.dumps(sent.decode()))
    # When
    reply = alice.post(f"/projects/{project}/import", document)
    # Then: the 413 naming the limit, as Lambda's payload limit would have it on AWS
    assert reply.status == 413, reply
    assert "over 1000 bytes" in reply.body["error"]["message"]
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_a_chunk_that_fails_half_way_is_delivered_again_and_creates_nothing_twice(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], monkeypatch: Any
) -> None:
    # Given: the first time a chunk is counted, the worker crashes instead
    project = make_project(alice)
    store = data_service()._imports
    count = store.chunk_done
    crashes = [RuntimeError("the worker stopped")]

    def crash_once(*args: Any, **kwargs: Any) -> Any:
        if crashes:
            raise crashes.pop()
        return count(*args, **kwargs)

    monkeypatch.setattr(store, "chunk_done", crash_once)
    document = {"format": "threads", "threads": [thread("One", "a", "b"), thread("Two", "c")]}
    # When
    progress = import_done(alice, project, document, drain)
    # Then
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    assert not crashes
    assert sorted(row["title"] for row in listed) == ["One", "Two"]
    assert (progress["status"], progress["threadsDone"], progress["messagesDone"]) == ("done", 2, 3)


def test_the_same_document_after_its_progress_expired_creates_nothing_twice(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: an import done, its progress and chunks gone (their TTL)
    project = make_project(alice)
    document = {"format": "threads", "threads": [thread("One", "a", "b")]}
    first = import_done(alice, project, document, drain)
    store = data_service()._imports
    store.client.delete_item(
        TableName=get_settings().imports_table,
        Key=import_key(alice.sub, project, progress_sk(first["id"])),
    )
    # When
    again = import_done(alice, project, document, drain)
    # Then
    listed = alice.get(f"/projects/{project}/conversations").body["conversations"]
    assert again["id"] == first["id"] and again["status"] == "done"
    assert [row["title"] for row in listed] == ["One"]
    assert listed[0]["messageCount"] == 2


def test_a_chunk_delivered_again_while_the_import_runs_is_counted_once(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given: three chunks, the first delivered three times before the second runs
    project = make_project(alice)
    small_settings(import_chunk_max_bytes=1_500)
    threads = [thread(f"T{n}", *[f"message {n}.{m}" for m in range(6)]) for n in range(3)]
    started = alice.post(f"/projects/{project}/import", {"format": "threads", "threads": threads})
    first = ImportJob(user_id=alice.sub, project_id=project, import_id=started.body["id"], chunk=0)
    # When
    job_runner().run(first)
    job_runner().run(first)
    drain()
    progress = alice.get(started.headers["Location"]).body
    # Then
    assert progress["status"] == "done"
    assert (progress["threadsDone"], progress["messagesDone"]) == (3, 18)
    assert len(alice.get(f"/projects/{project}/conversations").body["conversations"]) == 3


class ChunkRunsFirst:
    """The memory store's DynamoDB client, which runs ``rival`` (the same chunk, in full)
    once: after the store has read an entry, just before its first write of it lands, as
    a second worker given the same job at once would."""

    def __init__(self, rival: Callable[[], object]) -> None:
        self.real = dynamodb_client()
        self.rival: Callable[[], object] | None = rival

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def transact_write_items(self, **request: Any) -> Any:
        if self.rival is not None:
            rival, self.rival = self.rival, None
            rival()
        return self.real.transact_write_items(**request)


def test_the_same_chunk_run_twice_at_once_writes_its_memory_once(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], monkeypatch: Any
) -> None:
    # Given an export with a memory entry, imported into a project where its chunk runs
    # once, and into another where a second run of it lands while the first is writing
    source = make_project(alice)
    alice.put(f"/projects/{source}/memories/tone", {"value": "warm", "category": "brand"})
    say(alice, source, "hello")
    document = alice.get(f"/projects/{source}/export").body
    once, twice = make_project(alice), make_project(alice)
    run_once = import_done(alice, once, document, drain)
    started = alice.post(f"/projects/{twice}/import", document)
    job = ImportJob(user_id=alice.sub, project_id=twice, import_id=started.body["id"], chunk=0)
    rival = ChunkRunsFirst(lambda: data_service().run_chunk(job, clock.now()))
    monkeypatch.setattr(data_service()._memories, "_client", rival)
    # When
    data_service().run_chunk(job, clock.now())
    monkeypatch.undo()
    drain()
    # Then both runs wrote, and the entry has what one run gives it: one `imported` record
    assert rival.rival is None
    run_twice = alice.get(started.headers["Location"]).body
    for progress in (run_once, run_twice):
        assert (progress["status"], progress["memoriesDone"]) == ("done", 1), progress
        assert progress["errors"] == []
    history = {
        project: [
            (r["action"], r["newValue"], r["source"])
            for r in alice.get(f"/projects/{project}/memories/tone/history").body["history"]
        ]
        for project in (once, twice)
    }
    assert (
        history[twice]
        == history[once]
        == [
            ("created", "warm", "explicit"),
            ("created", "warm", "imported"),
        ]
    )
    entries = {
        project: alice.get(f"/projects/{project}/memories").body["memories"]
        for project in (once, twice)
    }
    assert entries[twice] == entries[once]


def chunks_kept(user: str, project: str, import_id: str) -> tuple[list[int], int]:
    """The numbers of the import's chunk items still in the Imports table, and how many
    chunks it has."""
    progress = import_store().progress(user, project, import_id)
    assert progress is not None
    found = (
        (n, import_store().chunk(user, project, import_id, n)) for n in range(progress.chunks_total)
    )
    return [n for n, chunk in found if chunk is not None], progress.chunks_total


def test_a_done_import_keeps_none_of_its_text_once_its_threads_are_deleted(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given an import in several chunks, done
    project = make_project(alice)
    small_settings(import_chunk_max_bytes=1_500)
    threads = [thread(f"T{n}", *[f"secret {n}.{m}" for m in range(6)]) for n in range(3)]
    document = {"format": "threads", "threads": threads}
    done = import_done(alice, project, document, drain)
    user = str(alice.sub)
    assert done["status"] == "done"
    # When the user deletes its threads, and sends the same document again
    for row in alice.get(f"/projects/{project}/conversations").body["conversations"]:
        assert alice.delete(f"/projects/{project}/conversations/{row['id']}").status == 204
    again = alice.post(f"/projects/{project}/import", document)
    drain()
    # Then no chunk of it is left, while its progress still answers, and answers done
    assert chunks_kept(user, project, done["id"])[0] == []
    assert not import_store().thread_ids(user, project)
    assert (again.status, again.body) == (202, done)
    assert alice.get(f"/projects/{project}/import/{done['id']}").body == done
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_a_running_import_keeps_the_chunks_still_to_run(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given an import in several chunks
    project = make_project(alice)
    small_settings(import_chunk_max_bytes=1_500)
    threads = [thread(f"T{n}", *[f"message {n}.{m}" for m in range(6)]) for n in range(3)]
    started = alice.post(f"/projects/{project}/import", {"format": "threads", "threads": threads})
    user = str(alice.sub)
    # When its first chunk has run
    first = ImportJob(user_id=user, project_id=project, import_id=started.body["id"], chunk=0)
    data_service().run_chunk(first, clock.now())
    running = alice.get(started.headers["Location"]).body
    # Then every chunk is still there until the import is done
    assert running["status"] == "running"
    kept, total = chunks_kept(user, project, running["id"])
    assert total > 1 and kept == list(range(total))
    drain()
    assert chunks_kept(user, project, running["id"]) == ([], total)


def three_threads() -> dict[str, Any]:
    return {
        "format": "threads",
        "threads": [thread(f"T{n}", *[f"message {n}.{m}" for m in range(6)]) for n in range(3)],
    }


def test_an_import_the_queue_throttles_is_a_429_and_the_same_document_again_runs_it(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given SQS throttles the first chunk's job
    project = make_project(alice)
    with no_backoff_sleep(), injected(sqs_client(), "sqs") as queue:
        queue.arm(0, QUEUE_THROTTLED, ALWAYS)
        # When
        throttled = alice.post(f"/projects/{project}/import", three_threads())
    # Then it is a 429 that says when to come back, not a 500
    assert queue.faulted, "the queue was never asked"
    assert (throttled.status, throttled.body["error"]["code"]) == (429, "throttled"), throttled
    assert throttled.headers.get("Retry-After") == str(get_settings().retry_after_seconds)
    # And the same document again queues it, and it runs
    progress = import_done(alice, project, three_threads(), drain)
    assert (progress["status"], progress["threadsDone"]) == ("done", 3), progress


def test_a_chunk_whose_next_job_the_queue_throttles_is_retried_not_failed(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given three chunks, and SQS throttling the job of the chunk after the first
    project = make_project(alice)
    small_settings(import_chunk_max_bytes=1_500)
    started = alice.post(f"/projects/{project}/import", three_threads())
    assert started.status == 202, started
    first = ImportJob(user_id=alice.sub, project_id=project, import_id=started.body["id"], chunk=0)
    with no_backoff_sleep(), injected(sqs_client(), "sqs") as queue:
        queue.arm(0, QUEUE_THROTTLED, ALWAYS)
        # When the worker runs the first chunk, then it fails for the queue's retries
        with pytest.raises(ClientError):
            job_runner().run(first)
    assert queue.faulted, "the next chunk was never queued"
    # And the import is not ended: it still runs
    assert alice.get(started.headers["Location"]).body["status"] != "failed"
    # When the queue delivers the chunk again
    drain()
    # Then every chunk is written, once
    progress = alice.get(started.headers["Location"]).body
    assert progress["status"] == "done", progress
    assert (progress["threadsDone"], progress["messagesDone"]) == (3, 18)
    assert len(alice.get(f"/projects/{project}/conversations").body["conversations"]) == 3


def test_an_import_whose_chunk_is_gone_fails_and_says_why(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: the chunk dropped (as its TTL would) before the worker reads it
    project = make_project(alice)
    started = alice.post(
        f"/projects/{project}/import", {"format": "threads", "threads": [thread("A", "a")]}
    )
    data_service()._imports.client.delete_item(
        TableName=get_settings().imports_table,
        Key=import_key(alice.sub, project, chunk_sk(started.body["id"], 0)),
    )
    # When
    drain()
    progress = alice.get(started.headers["Location"]).body
    # Then
    assert progress["status"] == "failed", progress
    assert progress["errors"] == ["Chunk 0 is gone (kept only so long)."]
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_an_import_stopped_by_its_importers_erasure_leaves_nothing_of_them(
    alice: Api, bob: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given: bob's import has written its first chunk, whose threads a later chunk creates
    project = make_project(alice)
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"}).status == 201
    small_settings(import_chunk_max_bytes=2_000)
    threads = [thread(f"T{n}", *[f"message {n}.{m}" for m in range(40)]) for n in range(3)]
    started = bob.post(f"/projects/{project}/import", {"format": "threads", "threads": threads})
    assert started.status == 202, started
    user = str(bob.sub)
    written = import_store().thread_ids(user, project)
    first = ImportJob(user_id=user, project_id=project, import_id=started.body["id"], chunk=0)
    data_service().run_chunk(first, clock.now())
    assert any(message_store().latest_after(user, project, t, None, 10) for t in written)
    # When: bob erases his data, then the queued chunks run
    erased = bob.delete(f"/projects/{project}/me")
    drain()
    # Then: no message, thread or import item of his is left
    assert erased.status == 204, erased
    assert not import_store().thread_ids(user, project)
    assert not import_store().erase(user, project, 10)
    assert import_store().progress(user, project, started.body["id"]) is None
    assert not [
        m for t in written for m in message_store().latest_after(user, project, t, None, 99)
    ]
    assert conversation_store().ids(user, project, 100) == []


def test_an_import_erased_while_its_chunk_runs_is_not_written_back_by_its_failure(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given an import whose chunk read its progress, then the importer's erasure took it
    project = make_project(alice)
    started = alice.post(f"/projects/{project}/import", {"format": "threads", "threads": []})
    user = str(alice.sub)
    read = import_store().progress(user, project, started.body["id"])
    assert read is not None
    import_store().erase(user, project, 10)
    # When the chunk stops and says why
    import_store().fail(read, "Stopped at chunk 0.", clock.now())
    # Then nothing of the import comes back
    assert import_store().progress(user, project, started.body["id"]) is None
    drain()


def test_an_importer_removed_from_the_project_gets_no_more_threads_from_their_import(
    alice: Api, bob: Api, make_project: MakeProject, drain: Callable[[], None], small_settings: Any
) -> None:
    # Given: bob's import is queued
    project = make_project(alice)
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"}).status == 201
    small_settings(import_chunk_max_bytes=2_000)
    threads = [thread(f"T{n}", *[f"message {n}.{m}" for m in range(40)]) for n in range(3)]
    started = bob.post(f"/projects/{project}/import", {"format": "threads", "threads": threads})
    assert started.status == 202, started
    # When: alice removes him before the chunks run
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    drain()
    # Then: not one of its messages was written
    user = str(bob.sub)
    assert conversation_store().ids(user, project, 100) == []
    ids = import_store().thread_ids(user, project)
    assert ids and not [
        m for t in ids for m in message_store().latest_after(user, project, t, None, 9)
    ]
    # And the import says it stopped, and why, instead of 'queued' for good
    stopped = import_store().progress(user, project, started.body["id"])
    assert stopped is not None and stopped.status == "failed"
    assert stopped.errors == [
        "Stopped at chunk 0: the importer's role no longer allows writing here."
    ]
    # And added back, he sends the same document again and it is all written
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"}).status == 201
    again = bob.post(f"/projects/{project}/import", {"format": "threads", "threads": threads})
    assert (again.status, again.body["id"]) == (202, started.body["id"])
    drain()
    done = bob.get(started.headers["Location"]).body
    assert (done["status"], done["threadsDone"], done["messagesDone"]) == ("done", 3, 120)


def test_a_chunk_that_read_its_importers_role_before_a_removal_creates_no_thread(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    drain: Callable[[], None],
    small_settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given: every chunk reads bob's role as it was before alice removed him
    project = make_project(alice)
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"}).status == 201
    started = bob.post(
        f"/projects/{project}/import", {"format": "threads", "threads": [thread("T", "a", "b")]}
    )
    assert started.status == 202, started
    # When
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    monkeypatch.setattr(data_service()._projects, "role_of", lambda *_: Role.EDITOR)
    drain()
    # Then: the thread is not created and its messages are taken back
    user = str(bob.sub)
    assert conversation_store().ids(user, project, 100) == []
    ids = import_store().thread_ids(user, project)
    assert ids and not [
        m for t in ids for m in message_store().latest_after(user, project, t, None, 9)
    ]
