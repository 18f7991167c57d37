"""What an import is held to, through the real handlers: the same times, limits and text
rules as every other write, and nothing appended twice."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
import decimal
from typing import Any

from botocore.exceptions import ClientError
import pytest

from local import background, embedded
from recall.domain import clock
from recall.domain.jobs import ImportJob
from recall.errors import Throttled
from recall.store.imports import ImportStore, import_key, progress_sk
from recall.store.memories import MemoryStore
from recall.wiring import data_service, import_store
from tests.integration.conftest import Api

MakeProject = Callable[..., str]


def import_done(api: Api, project: str, document: Any, drain: Callable[[], None]) -> Any:
    started = api.post(f"/projects/{project}/import", document)
    assert started.status == 202, started
    drain()
    progress = api.get(started.headers["Location"])
    assert progress.status == 200 and progress.body["status"] == "done", progress
    return progress.body


def plain(*messages: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "format": "threads",
        "threads": [
            {
                "title": "T",
                "messages": [
                    {"role": role, "content": content, "createdAt": at}
                    for role, content, at in messages
                ],
            }
        ],
    }


def exported(
    memories: list[dict[str, Any]], conversation: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "format": "recall.export",
        "version": 2,
        "exportedAt": "2025-06-01T00:00:00.000Z",
        "projectId": "P",
        "userId": "u",
        "conversations": [conversation] if conversation else [],
        "memories": memories,
    }


def exported_thread(
    messages: list[tuple[str, str, str]], created_at: str, updated_at: str
) -> dict[str, Any]:
    """One conversation of a Recall export, its messages each ``(role, content, at)``."""
    return {
        "id": "OLD",
        "title": "Old",
        "createdAt": created_at,
        "updatedAt": updated_at,
        "messages": [
            {"id": f"M{number}", "role": role, "content": content, "createdAt": at}
            for number, (role, content, at) in enumerate(messages)
        ],
    }


def memory(**changes: Any) -> dict[str, Any]:
    return {"key": "tone", "value": "warm", "category": "brand", **changes}


def fields(reply: Any) -> list[str]:
    assert reply.status == 422, reply
    return [detail["field"] for detail in reply.body["error"]["details"]]


def test_a_time_before_1970_is_a_422_naming_the_field_never_a_500(
    alice: Api, make_project: MakeProject
) -> None:
    # Given
    project = make_project(alice)
    fine = "2025-03-01T09:00:00Z"
    conversation = exported_thread(
        [("user", "c", "0999-12-31T23:59:59Z")], "0001-01-01T00:00:00+14:00", fine
    )
    # When
    threads = alice.post(
        f"/projects/{project}/import",
        plain(("user", "a", "0999-12-31T23:59:59Z"), ("assistant", "b", "1969-07-20T20:17:00Z")),
    )
    export = alice.post(f"/projects/{project}/import", exported([], conversation))
    # Then
    assert fields(threads) == ["threads.0.messages.0.createdAt", "threads.0.messages.1.createdAt"]
    assert fields(export) == [
        "conversations.0.createdAt",
        "conversations.0.messages.0.createdAt",
    ]
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_an_imported_expiry_past_the_memory_limit_is_a_422_as_a_put_is(
    alice: Api, make_project: MakeProject
) -> None:
    # Given
    project = make_project(alice)
    far = "2999-01-01T00:00:00+02:00"
    # When
    imported = alice.post(f"/projects/{project}/import", exported([memory(expiresAt=far)]))
    put = alice.put(
        f"/projects/{project}/memories/other",
        {"value": "v", "category": "brand", "expiresAt": far},
    )
    # Then
    assert fields(imported) == ["memories.0.expiresAt"]
    assert "3650 days ahead" in imported.body["error"]["details"][0]["message"]
    assert put.status == 422, put
    assert alice.get(f"/projects/{project}/memories").body["memories"] == []


def test_imported_history_times_are_stamps_like_every_other_time(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given
    project = make_project(alice)
    history = [
        {"action": "created", "newValue": "warm", "source": "explicit", "at": at}
        for at in ("2025-01-01T10:00:00+02:00", "2025-01-02T00:00:00-23:59")
    ]
    # When
    bad = alice.post(
        f"/projects/{project}/import",
        exported([memory(history=[history[0], {**history[1], "at": "0999-01-01T00:00:00Z"}])]),
    )
    import_done(alice, project, exported([memory(history=history)]), drain)
    held = alice.get(f"/projects/{project}/memories/tone/history").body["history"]
    # Then
    assert fields(bad) == ["memories.0.history.1.at"]
    assert [record["at"] for record in held][:2] == [
        "2025-01-01T08:00:00.000Z",
        "2025-01-02T23:59:00.000Z",
    ]


def test_imported_memory_keeps_when_it_was_said_not_when_it_was_imported(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given entries said long ago, one with no times at all, and times an import refuses
    project = make_project(alice)
    said = {"createdAt": "2025-01-01T10:00:00+02:00", "updatedAt": "2025-02-01T00:00:00Z"}
    future = clock.stamp(clock.now() + timedelta(days=1))
    # When
    refused = alice.post(
        f"/projects/{project}/import",
        exported(
            [
                memory(createdAt="yesterday"),
                memory(key="palette", updatedAt=future),
                memory(key="font", createdAt="1969-12-31T23:59:59Z"),
                memory(
                    key="hero", createdAt="2025-02-01T00:00:00Z", updatedAt="2025-01-01T00:00:00Z"
                ),
            ]
        ),
    )
    document = exported([memory(**said), memory(key="palette")])
    import_done(alice, project, document, drain)
    held = {m["key"]: m for m in alice.get(f"/projects/{project}/memories").body["memories"]}
    # Then the entry keeps its own times, as stamps; one without takes the document's
    assert fields(refused) == [
        "memories.0.createdAt",
        "memories.1.updatedAt",
        "memories.2.createdAt",
        "memories.3.updatedAt",
    ]
    assert (held["tone"]["createdAt"], held["tone"]["updatedAt"]) == (
        "2025-01-01T08:00:00.000Z",
        "2025-02-01T00:00:00.000Z",
    )
    assert held["palette"]["createdAt"] == held["palette"]["updatedAt"] == document["exportedAt"]


@pytest.mark.parametrize("blank", ["", "   ", "\u200b\n"])
def test_a_blank_message_is_a_422_naming_its_content(
    alice: Api, make_project: MakeProject, blank: str
) -> None:
    # Given
    project = make_project(alice)
    at = "2025-03-01T09:00:00Z"
    conversation = exported_thread([("user", blank, at)], at, at)
    # When
    threads = alice.post(
        f"/projects/{project}/import",
        plain(("user", blank, at), ("assistant", "fine", at), ("assistant", blank, at)),
    )
    export = alice.post(f"/projects/{project}/import", exported([], conversation))
    # Then
    assert fields(threads) == ["threads.0.messages.0.content", "threads.0.messages.2.content"]
    assert fields(export) == ["conversations.0.messages.0.content"]


def test_a_blank_reply_of_recalls_own_export_still_imports(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: a turn that ended in tool calls, as Recall saves it
    project = make_project(alice)
    at = "2025-03-01T09:00:00.000Z"
    conversation = exported_thread(
        [("user", "Remember: dark header", at), ("assistant", "", at)], at, at
    )
    # When
    progress = import_done(alice, project, exported([], conversation), drain)
    # Then
    assert progress["messagesDone"] == 2


def test_history_already_held_is_not_appended_again_by_later_imports(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: an entry with two changes, exported
    project = make_project(alice)
    memories = f"/projects/{project}/memories"
    assert alice.put(f"{memories}/tone", {"value": "warm", "category": "brand"}).status == 201
    assert alice.put(f"{memories}/tone", {"value": "dry", "category": "brand"}).status == 200
    document = alice.get(f"/projects/{project}/export").body
    # When: imported back into the same project, then two other documents with that history
    for title in ("", "One", "Two"):
        if title:
            document["conversations"] = [
                {
                    "id": title,
                    "title": title,
                    "createdAt": "2025-03-01T09:00:00.000Z",
                    "updatedAt": "2025-03-01T09:00:00.000Z",
                    "messages": [],
                }
            ]
        import_done(alice, project, document, drain)
    held = alice.get(f"{memories}/tone/history").body["history"]
    # Then: the two changes once each, beside what each import itself recorded
    kept = [(r["action"], r["newValue"], r["at"]) for r in held if r["source"] == "explicit"]
    assert kept == [
        (r["action"], r["newValue"], r["at"]) for r in document["memories"][0]["history"]
    ]
    assert len(kept) == 2


@pytest.mark.parametrize(("text", "count"), [("é", 100), ("中", 60), ("😀", 25), ("x", 100)])
def test_a_long_thread_in_any_script_imports_in_chunks_dynamodb_takes(
    alice: Api, make_project: MakeProject, drain: Callable[[], None], text: str, count: int
) -> None:
    # Given: 5,000 characters a message, 2 to 4 bytes each but for the ASCII twin
    project = make_project(alice)
    at = "2025-03-01T09:00:00Z"
    roles = ("user", "assistant")
    document = plain(*[(roles[n % 2], text * 5_000, at) for n in range(count)])
    # When: each chunk is one item, refused past 400 KB as AWS refuses it
    progress = import_done(alice, project, document, drain)
    thread = alice.get(f"/projects/{project}/conversations").body["conversations"][0]
    page = alice.get(f"/projects/{project}/conversations/{thread['id']}", query="limit=200")
    # Then
    assert (progress["threadsDone"], progress["messagesDone"]) == (1, count)
    assert thread["messageCount"] == count
    assert page.status == 200, page
    assert sum(message["content"] == text * 5_000 for message in page.body["messages"]) > 0


def test_a_confidence_too_small_to_store_is_a_422_not_a_stuck_import(
    alice: Api, make_project: MakeProject
) -> None:
    project = make_project(alice)
    imported = alice.post(f"/projects/{project}/import", exported([memory(confidence=1e-200)]))
    assert fields(imported) == ["memories.0.confidence"]


def test_a_number_dynamodb_cannot_hold_in_a_message_is_a_422_naming_it(
    alice: Api, make_project: MakeProject
) -> None:
    # Given: a tool call's input and a usage count DynamoDB could only round or refuse
    project = make_project(alice)
    at = "2025-03-01T09:00:00.000Z"
    conversation = exported_thread([("user", "Keep it dark", at), ("assistant", "", at)], at, at)
    reply = conversation["messages"][1]
    reply["toolCalls"] = [
        {
            "id": "t1",
            "name": "save_preference",
            "input": {
                "key": "dark",
                "extra": [1, {"tiny": 1.5e-200}],
                "big": 123456789012345678901234567890123456789012,
            },
        }
    ]
    reply["usage"] = {"inputTokens": 10**40 + 1, "outputTokens": 10**40}
    # When
    imported = alice.post(f"/projects/{project}/import", exported([], conversation))
    # Then: each is named, and nothing was started
    assert fields(imported) == [
        "conversations.0.messages.1.toolCalls.0.input.extra.1.tiny",
        "conversations.0.messages.1.toolCalls.0.input.big",
        "conversations.0.messages.1.usage.inputTokens",
    ]
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_a_negative_token_count_in_a_message_is_a_422_naming_it(
    alice: Api, make_project: MakeProject
) -> None:
    # Given: a reply whose usage counts fewer than no tokens
    project = make_project(alice)
    at = "2025-03-01T09:00:00.000Z"
    conversation = exported_thread(
        [("user", "Keep it dark", at), ("assistant", "Dark", at)], at, at
    )
    conversation["messages"][1]["usage"] = {
        "inputTokens": -1,
        "outputTokens": 5,
        "cacheReadInputTokens": -20,
        "cacheWriteInputTokens": -3,
    }
    # When
    imported = alice.post(f"/projects/{project}/import", exported([], conversation))
    # Then: each negative count is named, and nothing was started
    assert fields(imported) == [
        "conversations.0.messages.1.usage.inputTokens",
        "conversations.0.messages.1.usage.cacheReadInputTokens",
        "conversations.0.messages.1.usage.cacheWriteInputTokens",
    ]
    assert alice.get(f"/projects/{project}/conversations").body["conversations"] == []


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutItem"
    )


@pytest.mark.parametrize(
    "refusal",
    [decimal.Underflow("a number DynamoDB cannot hold"), client_error("ValidationException", 400)],
    ids=["underflow", "validation"],
)
def test_a_chunk_that_fails_for_good_ends_the_import_failed_saying_where(
    alice: Api,
    make_project: MakeProject,
    drain: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
    refusal: Exception,
) -> None:
    # Given a store that refuses the chunk's memory for a reason no retry gets past
    project = make_project(alice)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise refusal

    monkeypatch.setattr(MemoryStore, "write", refuse)
    # When it is imported and the worker runs what is queued
    started = alice.post(f"/projects/{project}/import", exported([memory()]))
    assert started.status == 202, started
    drain()
    # Then the import says it failed, and where, instead of 'queued' for good
    progress = alice.get(started.headers["Location"]).body
    assert progress["status"] == "failed", progress
    assert progress["errors"] == ["Chunk 0 could not be written; the import stopped there."]
    # And once the cause is gone, the same document again starts it over
    monkeypatch.undo()
    again = alice.post(f"/projects/{project}/import", exported([memory()]))
    assert (again.status, again.body["id"], again.body["status"]) == (
        202,
        started.body["id"],
        "queued",
    )
    drain()
    progress = alice.get(started.headers["Location"]).body
    assert (progress["status"], progress["memoriesDone"], progress["errors"]) == ("done", 1, [])


@pytest.mark.parametrize(
    "fault",
    [
        Throttled("The store is busy; try again shortly."),
        client_error("ProvisionedThroughputExceededException", 400),
        client_error("InternalServerError", 500),
        RuntimeError("the worker stopped"),
    ],
    ids=["throttled", "throughput", "internal", "crash"],
)
def test_a_chunk_that_meets_a_passing_fault_is_left_to_the_queue_to_try_again(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch, fault: Exception
) -> None:
    # Given an import queued, and a store that is busy
    project = make_project(alice)
    started = alice.post(f"/projects/{project}/import", exported([memory()]))
    job = ImportJob(
        user_id=alice.sub or "", project_id=project, import_id=started.body["id"], chunk=0
    )

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise fault

    monkeypatch.setattr(MemoryStore, "write", busy)
    # When the worker runs its chunk, then the failure is raised for the queue's retry
    with pytest.raises(type(fault)):
        data_service().run_chunk(job, clock.now())
    monkeypatch.undo()
    assert alice.get(started.headers["Location"]).body["status"] != "failed"
    data_service().run_chunk(job, clock.now())
    assert alice.get(started.headers["Location"]).body["status"] == "done"


def test_a_failed_import_keeps_only_the_chunks_it_never_counted(
    alice: Api,
    make_project: MakeProject,
    drain: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an import in two chunks, a thread then a memory entry, whose second chunk the
    # store refuses for good
    project = make_project(alice)
    service = data_service()
    small = service._settings.model_copy(update={"import_chunk_max_bytes": 1_500})
    monkeypatch.setattr(service, "_settings", small)
    said = [("user", "a" * 600, "2025-05-01T08:00:00.000Z")]
    replied = [("assistant", "b" * 600, "2025-05-01T08:00:01.000Z")]
    document = exported(
        [memory()],
        exported_thread(said + replied, "2025-05-01T08:00:00.000Z", "2025-05-01T08:00:01.000Z"),
    )

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise decimal.Underflow("a number DynamoDB cannot hold")

    write = MemoryStore.write
    monkeypatch.setattr(MemoryStore, "write", refuse)
    # When it fails
    started = alice.post(f"/projects/{project}/import", document)
    drain()
    user, import_id = alice.sub or "", started.body["id"]
    failed = alice.get(started.headers["Location"]).body
    # Then the chunks it counted, whose thread is written, are gone; the last is kept
    progress = import_store().progress(user, project, import_id)
    assert progress is not None and progress.counted == set(range(progress.chunks_total - 1))
    dropped = [import_store().chunk(user, project, import_id, n) for n in progress.counted]
    assert (failed["status"], failed["threadsDone"]) == ("failed", 1)
    assert dropped == [None] * len(dropped)
    assert import_store().chunk(user, project, import_id, progress.chunks_total - 1) is not None
    # And the same document again starts it over and writes it whole, keeping no chunk
    monkeypatch.setattr(MemoryStore, "write", write)
    assert alice.post(f"/projects/{project}/import", document).body["status"] == "queued"
    drain()
    done = alice.get(started.headers["Location"]).body
    assert (done["status"], done["threadsDone"], done["memoriesDone"]) == ("done", 1, 1)
    assert not [
        n
        for n in range(progress.chunks_total)
        if import_store().chunk(user, project, import_id, n) is not None
    ]
    assert len(alice.get(f"/projects/{project}/conversations").body["conversations"]) == 1


@pytest.mark.parametrize(
    "fault",
    [
        Throttled("The store is busy; try again shortly."),
        client_error("ProvisionedThroughputExceededException", 400),
    ],
    ids=["throttled", "throughput"],
)
def test_an_import_whose_chunks_cannot_be_deleted_is_done_all_the_same(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch, fault: Exception
) -> None:
    # Given an import of one chunk, and a store that refuses to delete its chunks
    project = make_project(alice)
    started = alice.post(f"/projects/{project}/import", exported([memory()]))
    user = alice.sub or ""
    job = ImportJob(user_id=user, project_id=project, import_id=started.body["id"], chunk=0)

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise fault

    monkeypatch.setattr(ImportStore, "drop_chunks", busy)
    # When the worker runs it, then nothing is raised for the queue to run it again
    data_service().run_chunk(job, clock.now())
    # And it is done, its chunk left to its TTL
    done = alice.get(started.headers["Location"]).body
    assert (done["status"], done["memoriesDone"], done["errors"]) == ("done", 1, [])
    assert import_store().chunk(user, project, started.body["id"], 0) is not None


def test_an_import_whose_job_was_dead_lettered_goes_on_when_its_document_comes_again(
    alice: Api,
    make_project: MakeProject,
    drain: Callable[[], None],
    embedded_store: embedded.EmbeddedStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an import in two chunks, a thread then a memory entry, whose second chunk meets
    # a busy store on every try until the queue dead-letters its job
    project = make_project(alice)
    service = data_service()
    small = service._settings.model_copy(update={"import_chunk_max_bytes": 1_500})
    monkeypatch.setattr(service, "_settings", small)
    said = [("user", "a" * 600, "2025-05-01T08:00:00.000Z")]
    replied = [("assistant", "b" * 600, "2025-05-01T08:00:01.000Z")]
    document = exported(
        [memory()],
        exported_thread(said + replied, "2025-05-01T08:00:00.000Z", "2025-05-01T08:00:01.000Z"),
    )
    [poller] = background.pollers(embedded_store)
    dead_before = poller.dead_letters()

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise Throttled("The store is busy; try again shortly.")

    write = MemoryStore.write
    monkeypatch.setattr(MemoryStore, "write", busy)
    started = alice.post(f"/projects/{project}/import", document)
    drain()
    stuck = alice.get(started.headers["Location"]).body
    assert poller.dead_letters() == dead_before + 1
    assert (stuck["status"], stuck["threadsDone"], stuck["memoriesDone"]) == ("running", 1, 0)
    monkeypatch.setattr(MemoryStore, "write", write)
    # When the same document comes again before IMPORT_STALL_SECONDS, nothing is queued
    assert alice.post(f"/projects/{project}/import", document).status == 202
    drain()
    assert alice.get(started.headers["Location"]).body == stuck
    # And when it comes again after, the import goes on from its next chunk
    later = clock.parse(stuck["updatedAt"]) + timedelta(seconds=small.import_stall_seconds)
    monkeypatch.setattr(clock, "now", lambda: later)
    again = alice.post(f"/projects/{project}/import", document)
    drain()
    # Then it is done, the thread counted once and the memory entry written
    assert (again.status, again.body["id"]) == (202, started.body["id"])
    done = alice.get(started.headers["Location"]).body
    assert (done["status"], done["threadsDone"], done["messagesDone"]) == ("done", 1, 2)
    assert (done["memoriesDone"], done["errors"]) == (1, [])


def test_of_two_requests_taking_up_a_stalled_import_only_one_queues_its_chunk(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given an import whose chunk has not moved for IMPORT_STALL_SECONDS
    project = make_project(alice)
    started = alice.post(f"/projects/{project}/import", exported([memory()]))
    service = data_service()
    progress = service._imports.progress(alice.sub or "", project, started.body["id"])
    assert progress is not None
    later = clock.parse(progress.updated_at) + timedelta(seconds=3600)
    # When two requests that read it take it up at once, then only the first wins
    assert [service._imports.take_up(progress, later) for _ in range(2)] == [True, False]
    drain()


def test_an_import_s_progress_item_holds_each_count_once_under_the_names_its_updates_use(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given an import started
    project = make_project(alice)
    started = alice.post(f"/projects/{project}/import", exported([memory()]))
    imports = data_service()._imports
    key = import_key(alice.sub or "", project, progress_sk(started.body["id"]))

    def attributes() -> set[str]:
        return set(imports.client.get_item(TableName=imports._table, Key=key)["Item"])

    before = attributes()
    # When its one chunk is counted
    drain()
    # Then the counts and times were moved, never written a second time beside the first
    assert not {name for name in before | attributes() if "_" in name}
    assert attributes() - before == {"doneChunks"}


def test_an_entry_with_more_history_than_a_chunk_holds_imports_whole(
    alice: Api,
    make_project: MakeProject,
    drain: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given chunks of 2 KB and an entry changed 40 times, about 8 KB of history
    project = make_project(alice)
    service = data_service()
    small = service._settings.model_copy(update={"import_chunk_max_bytes": 2_000})
    monkeypatch.setattr(service, "_settings", small)
    changes = [
        {
            "action": "updated",
            "oldValue": f"tone {n}",
            "newValue": f"tone {n + 1}",
            "source": "extracted",
            "at": f"2025-05-01T08:{n:02d}:00.000Z",
        }
        for n in range(40)
    ]
    # When it is imported
    progress = import_done(alice, project, exported([memory(history=changes)]), drain)
    # Then the entry and its whole history are in, in order, and nothing is reported lost
    assert (progress["memoriesDone"], progress["errors"]) == (1, [])
    held = alice.get(f"/projects/{project}/memories/tone/history").body["history"]
    assert [r["newValue"] for r in held if r["source"] == "extracted"] == [
        f"tone {n + 1}" for n in range(40)
    ]
    entries = alice.get(f"/projects/{project}/memories").body["memories"]
    assert [(entry["key"], entry["value"]) for entry in entries] == [("tone", "warm")]


def test_a_thread_setting_of_the_wrong_type_is_a_422_as_the_api_gives_it(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a thread whose settings say true for a number
    project = make_project(alice)
    thread = exported_thread([], "2025-05-01T08:00:00.000Z", "2025-05-01T08:00:00.000Z")
    document = exported([], {**thread, "settings": {"maxTokens": True}})
    # When it is imported, then the field is named as a PATCH names it
    reply = alice.post(f"/projects/{project}/import", document)
    assert fields(reply) == ["conversations.0.settings.maxTokens"]


class CrashAfterCounting(Exception):
    """The worker stops between counting the last chunk and saying the import is done."""


def counted_but_not_done(
    alice: Api, project: str, document: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, ImportJob]:
    """A one-chunk import whose worker stopped right after counting the chunk."""
    started = alice.post(f"/projects/{project}/import", document)
    job = ImportJob(
        user_id=alice.sub or "", project_id=project, import_id=started.body["id"], chunk=0
    )
    with monkeypatch.context() as patched:

        def crash(*args: Any, **kwargs: Any) -> None:
            raise CrashAfterCounting

        patched.setattr(ImportStore, "_set_status", crash)
        with pytest.raises(CrashAfterCounting):
            data_service().run_chunk(job, clock.now())
    stopped = alice.get(started.headers["Location"]).body
    assert (stopped["status"], stopped["memoriesDone"]) == ("running", 1)
    return started, job


def test_an_import_counted_whole_but_stopped_before_done_is_finished_by_its_redelivery(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-chunk import whose worker stopped right after counting the chunk
    project = make_project(alice)
    started, job = counted_but_not_done(alice, project, exported([memory()]), monkeypatch)
    # When the queue delivers the job again
    data_service().run_chunk(job, clock.now())
    # Then the import is done, and keeps no chunk
    done = alice.get(started.headers["Location"]).body
    assert (done["status"], done["memoriesDone"]) == ("done", 1)
    assert import_store().chunk(job.user_id, project, job.import_id, 0) is None


def test_the_same_document_again_finishes_an_import_counted_whole_but_not_done(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a one-chunk import counted whole, whose worker stopped before saying done
    project = make_project(alice)
    document = exported([memory()])
    started, _ = counted_but_not_done(alice, project, document, monkeypatch)
    # When the document is sent again, long after, as for a stalled import
    stopped = alice.get(started.headers["Location"]).body
    later = clock.parse(stopped["updatedAt"]) + timedelta(days=1)
    monkeypatch.setattr(clock, "now", lambda: later)
    again = alice.post(f"/projects/{project}/import", document)
    # Then it answers the import done, rather than queueing a chunk past its last
    assert (again.status, again.body["status"], again.body["id"]) == (202, "done", stopped["id"])
    assert alice.get(started.headers["Location"]).body["status"] == "done"


def test_a_twin_delivery_of_the_last_chunk_leaves_the_import_done(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the last chunk delivered twice: one run reads the progress, then the other runs
    # to the end (counting it, saying done, dropping every chunk) before it reads its chunk
    project = make_project(alice)
    started = alice.post(f"/projects/{project}/import", exported([memory()]))
    job = ImportJob(
        user_id=alice.sub or "", project_id=project, import_id=started.body["id"], chunk=0
    )
    chunk = ImportStore.chunk
    twins: list[bool] = []

    def after_the_twin(self: ImportStore, *args: Any) -> Any:
        if not twins:
            twins.append(True)
            data_service().run_chunk(job, clock.now())
        return chunk(self, *args)

    monkeypatch.setattr(ImportStore, "chunk", after_the_twin)
    # When the first run goes on and finds its chunk gone
    data_service().run_chunk(job, clock.now())
    # Then the import stays done, with nothing said against it
    done = alice.get(started.headers["Location"]).body
    assert (done["status"], done["memoriesDone"], done["errors"]) == ("done", 1, [])


def test_an_entry_without_times_is_written_once_by_a_chunk_run_again_after_a_resend(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an entry with no times of its own, written by a chunk whose worker then stopped
    # before counting it
    project = make_project(alice)
    document = exported([memory()])
    started = alice.post(f"/projects/{project}/import", document)
    job = ImportJob(
        user_id=alice.sub or "", project_id=project, import_id=started.body["id"], chunk=0
    )
    with monkeypatch.context() as patched:

        def crash(*args: Any, **kwargs: Any) -> None:
            raise CrashAfterCounting

        patched.setattr(ImportStore, "chunk_done", crash)
        with pytest.raises(CrashAfterCounting):
            data_service().run_chunk(job, clock.now())
    [first] = alice.get(f"/projects/{project}/memories").body["memories"]
    # When the client sends the same document again a little later, and the chunk runs again
    later = clock.now() + timedelta(seconds=5)
    monkeypatch.setattr(clock, "now", lambda: later)
    assert alice.post(f"/projects/{project}/import", document).body["id"] == job.import_id
    data_service().run_chunk(job, clock.now())
    # Then the entry was written once, said when the document was exported
    [entry] = alice.get(f"/projects/{project}/memories").body["memories"]
    history = alice.get(f"/projects/{project}/memories/tone/history").body["history"]
    assert [record["action"] for record in history] == ["created"]
    assert entry["createdAt"] == entry["updatedAt"] == first["updatedAt"] == document["exportedAt"]
