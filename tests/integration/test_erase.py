"""Erasing a member's data in a project (``DELETE …/me``) and deleting a whole project,
through the real handlers: afterwards no table holds an item of that user and project,
listed through each store's own queries and cross-checked by scanning every table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
import json
import threading
from typing import Any
import uuid

import boto3
import pytest

from local import background, embedded, template
from local.seed import grow_thread
from recall.domain import clock
from recall.domain.jobs import EraseJob, ExtractJob, SummarizeJob
from recall.errors import Conflict
from recall.services.chat import ChatService
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client, to_value
from recall.store.erasure_markers import ErasureMarkers
from recall.store.exports import s3_client
from recall.store.idempotency import OWNER
from recall.store.jobs import sqs_client
from recall.store.keys import USER_ID_MAX_BYTES, owner_key
from recall.wiring import (
    conversation_store,
    erasure_service,
    job_runner,
    memory_store,
    message_store,
    project_store,
)
from tests.integration.conftest import (
    Api,
    exported_objects,
    live_session_item,
    new_user,
    transactions_after_every_racer_read,
)
from tests.integration.fault_injection import (
    ALWAYS,
    QUEUE_THROTTLED,
    THROTTLES,
    injected,
    no_backoff_sleep,
)

MakeProject = Callable[..., str]


def say(api: Api, project: str, message: str, thread: str | None = None, key: str = "") -> Any:
    body: dict[str, Any] = {"message": message}
    if thread:
        body["conversationId"] = thread
    headers = {"Idempotency-Key": key} if key else None
    reply = api.post(f"/projects/{project}/chat", body, headers=headers)
    assert reply.status == 200, reply
    return reply.body


def fill(api: Api, project: str) -> list[str]:
    """Something of ``api``'s user in every table: two threads with messages, two sessions
    (the turns' live one, and an older one), persistent, thread and expiring memory with
    history and counters, and an idempotency record. The thread ids, for the stores'
    per-thread reads."""
    first = say(api, project, "Always keep the header dark.")["conversation"]["id"]
    say(api, project, "Never use bright blue anywhere.", first, key="k-1")
    second = say(api, project, "Plan the spring sale")["conversation"]["id"]
    memories = f"/projects/{project}/memories"
    soon = clock.stamp(clock.now() + timedelta(days=1))
    promo = {"value": "10% off", "category": "context", "expiresAt": soon}
    note = {"value": "draft", "category": "context", "scope": "thread", "conversationId": second}
    assert api.put(f"{memories}/promo", promo).status == 201
    assert api.put(f"{memories}/thread_note", note).status == 201
    settings, user = get_settings(), str(api.sub)
    earlier = clock.stamp(clock.now() - timedelta(days=3))
    item = live_session_item(settings, user, project, earlier)
    dynamodb_client().put_item(TableName=settings.sessions_table, Item=item)
    return [first, second]


def longest_user(letter: str) -> Api:
    """A fresh user whose id is as long as a token's ``sub`` may be, mostly ``letter``."""
    user = new_user()
    room = USER_ID_MAX_BYTES - len(user)
    repeated = room // len(letter.encode())
    return Api(user + letter * repeated + "u" * (room - repeated * len(letter.encode())))


def markers() -> ErasureMarkers:
    return ErasureMarkers(get_settings(), project_store())


def held(user: str, project: str, threads: list[str]) -> dict[str, list[Any]]:
    """Every item of ``user`` in ``project``, table by table, through the stores' queries."""
    settings = get_settings()
    owner = owner_key(user, project)
    projects = project_store()
    return {
        "membership": [role] if (role := projects.role_of(project, user)) else [],
        "erasure marker": [True] if markers().erasure_pending(project, user) else [],
        "conversations": conversation_store().ids(user, project, 1_000),
        "messages": [
            message
            for thread in threads
            for message in message_store().latest_after(user, project, thread, None, 1_000)
        ],
        "sessions": partition(settings.sessions_table, owner),
        "memories": partition(settings.memories_table, owner),
        "idempotency records": partition(settings.idempotency_table, owner),
        "imports": partition(settings.imports_table, owner),
        "exports": exported_objects(user, project),
    }


def partition(table: str, owner: str) -> list[Any]:
    """Every item under ``owner``: the Memories and Idempotency tables' partition key."""
    items: list[Any] = dynamodb_client().query(
        TableName=table,
        KeyConditionExpression="#owner = :owner",
        ExpressionAttributeNames={"#owner": OWNER},
        ExpressionAttributeValues={":owner": to_value(owner)},
        ConsistentRead=True,
    )["Items"]
    return items


def nothing(found: dict[str, list[Any]]) -> bool:
    return not any(found.values())


def everything(found: dict[str, list[Any]]) -> bool:
    """Something in every table a member's data lives in (imports and exports: tests of
    their own)."""
    left_out = ("erasure marker", "imports", "exports")
    return all(items for kind, items in found.items() if kind not in left_out)


def mentions(user: str, project: str) -> list[tuple[str, dict[str, Any]]]:
    """A cross-check past the stores: every item of every table that names both."""
    raw = boto3.client("dynamodb")
    found = []
    for request in template.create_table_requests():
        for page in raw.get_paginator("scan").paginate(TableName=request["TableName"]):
            for item in page["Items"]:
                text = json.dumps(item)
                if user in text and project in text:
                    found.append((request["TableName"], item))
    return found


@pytest.fixture
def shared(alice: Api, bob: Api, make_project: MakeProject) -> Iterator[tuple[str, str]]:
    """Two projects of alice's where bob is an editor, each with both users' data."""
    first = make_project(alice, {bob: "editor"})
    second = make_project(alice, {bob: "editor"})
    yield first, second


def test_erasing_yourself_leaves_nothing_of_you_and_touches_no_one_else(
    alice: Api, bob: Api, shared: tuple[str, str]
) -> None:
    # Given both users' data in two projects
    project, other = shared
    threads = {(api.sub, p): fill(api, p) for api in (alice, bob) for p in shared}
    kept = {
        (user, p): held(user or "", p, ids) for (user, p), ids in threads.items() if user != bob.sub
    }
    kept[(bob.sub, other)] = held(bob.sub or "", other, threads[(bob.sub, other)])
    assert all(everything(found) for found in kept.values())
    assert everything(held(bob.sub or "", project, threads[(bob.sub, project)]))
    # When
    reply = bob.delete(f"/projects/{project}/me")
    # Then nothing of bob in that project is left, in any table
    assert reply.status == 204, reply
    assert nothing(held(bob.sub or "", project, threads[(bob.sub, project)]))
    assert mentions(bob.sub or "", project) == []
    # And the other member's data, and bob's in the other project, are as they were
    for (user, p), before in kept.items():
        assert held(user or "", p, threads[(user, p)]) == before
    # And bob is no longer a member
    assert bob.get(f"/projects/{project}/conversations").status == 403
    members = alice.get(f"/projects/{project}/members").body["members"]
    assert [member["userId"] for member in members] == [alice.sub]
    assert project in [row["id"] for row in alice.get("/projects").body["projects"]]
    assert project not in [row["id"] for row in bob.get("/projects").body["projects"]]


def test_erasing_yourself_takes_your_large_exports_and_no_one_elses(
    alice: Api, bob: Api, shared: tuple[str, str], export_settings: Callable[..., None]
) -> None:
    # Given both users' large exports (JSON Lines in the exports bucket) of both projects
    project = shared[0]
    threads = {(api.sub, p): fill(api, p) for api in (alice, bob) for p in shared}
    export_settings(export_max_bytes=0)
    for api in (alice, bob):
        for p in shared:
            assert api.get(f"/projects/{p}/export").body["format"] == "recall.export.jsonl"
    kept = {
        (user, p): exported_objects(user or "", p)
        for (user, p) in threads
        if (user, p) != (bob.sub, project)
    }
    assert all(kept.values()) and exported_objects(bob.sub or "", project)
    # When
    reply = bob.delete(f"/projects/{project}/me")
    # Then bob's exports of that project are gone, with the rest of his data there
    assert reply.status == 204, reply
    assert nothing(held(bob.sub or "", project, threads[(bob.sub, project)]))
    # And everyone else's exports, and bob's of the other project, are as they were
    assert {key: exported_objects(key[0] or "", key[1]) for key in kept} == kept


def test_the_last_owner_cannot_erase_themselves(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given
    project = make_project(alice, {bob: "editor"})
    threads = fill(alice, project)
    # When
    refused = alice.delete(f"/projects/{project}/me")
    # Then
    assert refused.status == 409, refused
    assert "last owner" in refused.body["error"]["message"]
    assert everything(held(alice.sub or "", project, threads))
    # And once someone else is an owner, they can
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "owner"}).status == 200
    assert alice.delete(f"/projects/{project}/me").status == 204
    assert nothing(held(alice.sub or "", project, threads))
    assert bob.get(f"/projects/{project}").body["role"] == "owner"


def test_a_viewer_can_erase_themselves(alice: Api, carol: Api, make_project: MakeProject) -> None:
    # Given
    project = make_project(alice, {carol: "viewer"})
    # When
    reply = carol.delete(f"/projects/{project}/me")
    # Then
    assert reply.status == 204, reply
    assert mentions(carol.sub or "", project) == []
    assert carol.get(f"/projects/{project}").status == 403


def test_a_stranger_cannot_erase_anything(alice: Api, bob: Api, make_project: MakeProject) -> None:
    project = make_project(alice)
    assert bob.delete(f"/projects/{project}/me").status == 403
    assert bob.delete(f"/projects/{project}").status == 403


def test_an_erasure_that_fails_part_way_shows_nothing_and_a_retry_finishes_it(
    alice: Api, bob: Api, shared: tuple[str, str]
) -> None:
    # Given bob's data, and every batch delete failing past its retries
    project, _ = shared
    threads = fill(bob, project)
    alice_threads = fill(alice, project)
    alice_before = held(alice.sub or "", project, alice_threads)
    with no_backoff_sleep(), injected(dynamodb_client()) as faults:
        faults.arm(0, THROTTLES[1], ALWAYS, plan=["BatchWriteItem"])
        # When
        failed = bob.delete(f"/projects/{project}/me")
    # Then the request failed, its marker stays, and nothing of the half-done erasure shows
    assert failed.status == 429, failed
    assert held(bob.sub or "", project, threads)["erasure marker"] == [True]
    assert bob.get(f"/projects/{project}/conversations").status == 403
    assert bob.get(f"/projects/{project}/memories").status == 403
    assert bob.post(f"/projects/{project}/chat", {"message": "still here?"}).status == 403
    members = alice.get(f"/projects/{project}/members").body["members"]
    assert bob.sub not in [member["userId"] for member in members]
    # And nobody can add bob back into data still being erased
    again = alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"})
    assert again.status == 409, again
    assert again.headers["Retry-After"] == str(get_settings().retry_after_seconds)
    # When bob retries
    retried = bob.delete(f"/projects/{project}/me")
    # Then it is finished, and alice's data was never touched
    assert retried.status == 204, retried
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []
    assert held(alice.sub or "", project, alice_threads) == alice_before
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"}).status == 201


def test_the_worker_finishes_an_erasure_that_failed_part_way(
    alice: Api, bob: Api, shared: tuple[str, str], embedded_store: embedded.EmbeddedStore
) -> None:
    # Given an erasure that failed after its marker
    project, _ = shared
    threads = fill(bob, project)
    with no_backoff_sleep(), injected(dynamodb_client()) as faults:
        faults.arm(0, THROTTLES[1], ALWAYS, plan=["BatchWriteItem"])
        assert bob.delete(f"/projects/{project}/me").status == 429
    # When the worker runs the job the failed request queued
    for poller in background.pollers(embedded_store):
        poller.drain(deadline_seconds=30)
    # Then
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_a_large_erasure_answers_202_and_the_worker_finishes_it(
    alice: Api,
    bob: Api,
    shared: tuple[str, str],
    embedded_store: embedded.EmbeddedStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given more of bob's items than one run may delete
    project, _ = shared
    threads = fill(bob, project)
    monkeypatch.setattr(erasure_service(), "_budget", 5)
    # When
    reply = bob.delete(f"/projects/{project}/me")
    # Then bob already holds no role, and the rest is left to the worker
    assert reply.status == 202, reply
    assert reply.body == {"projectId": project, "status": "erasing"}
    assert bob.get(f"/projects/{project}/conversations").status == 403
    assert not nothing(held(bob.sub or "", project, threads))
    # When the worker runs, each run deleting five items and queueing the rest
    for poller in background.pollers(embedded_store):
        poller.drain(deadline_seconds=60)
    # Then
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_a_large_erasure_whose_job_the_queue_throttles_is_a_429_and_a_retry_finishes_it(
    alice: Api,
    bob: Api,
    shared: tuple[str, str],
    embedded_store: embedded.EmbeddedStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given more of bob's items than one run may delete, and SQS throttling the hand-off
    project, _ = shared
    threads = fill(bob, project)
    monkeypatch.setattr(erasure_service(), "_budget", 5)
    with no_backoff_sleep(), injected(sqs_client(), "sqs") as queue:
        queue.arm(0, QUEUE_THROTTLED, ALWAYS)
        # When
        throttled = bob.delete(f"/projects/{project}/me")
    # Then it is a 429 that says when to come back, not a 500, and bob is already out
    assert queue.faulted, "the hand-off was never throttled"
    assert (throttled.status, throttled.body["error"]["code"]) == (429, "throttled"), throttled
    assert throttled.headers.get("Retry-After") == str(get_settings().retry_after_seconds)
    assert bob.get(f"/projects/{project}/conversations").status == 403
    # When bob retries, and the worker runs what that hands on
    assert bob.delete(f"/projects/{project}/me").status in (202, 204)
    for poller in background.pollers(embedded_store):
        poller.drain(deadline_seconds=60)
    # Then
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_deleting_a_project_keeps_the_owners_marker_until_every_other_member_is_erased(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an owner whose id sorts before a member's, the member with data past one run,
    # and SQS throttling the hand-off
    tag = uuid.uuid4().hex[:8]
    owner, member = Api(f"aaa-{tag}"), Api(f"zzz-{tag}")
    project = make_project(owner, {member: "editor"})
    for n in range(3):
        assert member.post(f"/projects/{project}/chat", {"message": f"hello {n}"}).status == 200
    monkeypatch.setattr(erasure_service(), "_budget", 10)
    with no_backoff_sleep(), injected(sqs_client(), "sqs") as queue:
        queue.arm(0, QUEUE_THROTTLED, ALWAYS)
        # When the owner deletes the project and the run stops part-way
        first = owner.delete(f"/projects/{project}")
    assert first.status == 429, first
    # Then the owner is still marked, so their retry finishes what is left
    pending = ErasureMarkers(get_settings(), project_store()).erasures(project, 10)
    assert owner.sub in pending and member.sub in pending
    monkeypatch.setattr(erasure_service(), "_budget", get_settings().erase_items_per_run)
    assert owner.delete(f"/projects/{project}").status == 204


def test_a_turn_racing_an_erasure_saves_nothing(
    alice: Api, bob: Api, shared: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given bob's turn, which read his role, and his erasure landing before its save
    project, _ = shared
    threads = fill(bob, project)
    client = dynamodb_client()
    transact = client.transact_write_items
    erased: list[bool] = []
    racing = [True]

    def erase_first(**kwargs: Any) -> Any:
        if racing:  # once; the erasure's own transaction passes straight through
            racing.clear()
            erased.append(erasure_service().erase_me(bob.sub or "", project))
        return transact(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", erase_first)
    # When
    reply = bob.post(f"/projects/{project}/chat", {"message": "One more thing"})
    monkeypatch.undo()
    # Then the turn was refused (its thread, or bob's role, gone) and left nothing behind
    assert erased == [True]
    assert reply.status in (403, 404), reply
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_jobs_queued_before_an_erasure_recreate_nothing(
    alice: Api, bob: Api, shared: tuple[str, str]
) -> None:
    # Given jobs for bob's threads, queued before his erasure
    project, _ = shared
    threads = fill(bob, project)
    jobs = [
        job(user_id=bob.sub or "", project_id=project, conversation_id=thread)
        for thread in threads
        for job in (ExtractJob, SummarizeJob)
    ]
    assert bob.delete(f"/projects/{project}/me").status == 204
    # When they run
    for job in jobs:
        job_runner().run(job)
    # Then
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_deleting_a_project_erases_everyone_in_it_and_nothing_else(
    alice: Api, bob: Api, carol: Api, shared: tuple[str, str]
) -> None:
    # Given both users' data in two projects, and carol a viewer of the first
    project, other = shared
    assert alice.put(f"/projects/{project}/members/{carol.sub}", {"role": "viewer"}).status == 201
    threads = {(api.sub, p): fill(api, p) for api in (alice, bob) for p in shared}
    kept = {
        (user, other): held(user or "", other, threads[(user, other)])
        for user in (alice.sub, bob.sub)
    }
    # When an editor tries, then the owner deletes it
    assert bob.delete(f"/projects/{project}").status == 403
    reply = alice.delete(f"/projects/{project}")
    # Then nothing of anyone in it is left
    assert reply.status == 204, reply
    for api in (alice, bob):
        assert nothing(held(api.sub or "", project, threads[(api.sub, project)]))
    for api in (alice, bob, carol):
        assert mentions(api.sub or "", project) == []
        assert api.get(f"/projects/{project}").status == 403
        assert project not in [row["id"] for row in api.get("/projects").body["projects"]]
    assert project_store().get(project) is None
    # And the other project is as it was
    for (user, p), before in kept.items():
        assert held(user or "", p, threads[(user, p)]) == before


def test_a_project_deletion_that_fails_part_way_hides_the_project_and_a_retry_finishes_it(
    alice: Api, bob: Api, carol: Api, shared: tuple[str, str]
) -> None:
    # Given
    project, _ = shared
    threads = {api.sub: fill(api, project) for api in (alice, bob)}
    with no_backoff_sleep(), injected(dynamodb_client()) as faults:
        # the members' markers, the members' removal, then the first batch of data
        faults.arm(2, THROTTLES[1], ALWAYS, plan=["BatchWriteItem"] * 3)
        # When
        failed = alice.delete(f"/projects/{project}")
    # Then nobody sees the project meanwhile, and nobody can join it
    assert failed.status == 429, failed
    assert project_store().get(project) is None
    for api in (alice, bob):
        assert api.get(f"/projects/{project}").status == 403
        assert api.get(f"/projects/{project}/conversations").status == 403
    assert alice.put(f"/projects/{project}/members/{carol.sub}", {"role": "viewer"}).status == 403
    # When the owner retries
    assert alice.delete(f"/projects/{project}").status == 204
    # Then
    for api in (alice, bob):
        assert nothing(held(api.sub or "", project, threads[api.sub]))
        assert mentions(api.sub or "", project) == []


@pytest.mark.parametrize("erased_after", ["the thread was read", "its memory was read"])
def test_an_extraction_running_across_an_erasure_writes_nothing_back(
    alice: Api,
    bob: Api,
    shared: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    erased_after: str,
) -> None:
    # Given an extraction job of bob's on a thread restating a rule he already saved, with
    # his erasure landing while it runs
    project, _ = shared
    threads = fill(bob, project)
    grow_thread(bob.sub or "", project, threads[1], 6, lambda _: "Always keep the header dark.")
    step = (
        (conversation_store(), "get")
        if erased_after == "the thread was read"
        else (memory_store(), "active")
    )
    real = getattr(*step)

    def then_erase(*args: Any) -> Any:
        found = real(*args)
        monkeypatch.setattr(*step, real)
        assert erasure_service().erase_me(bob.sub or "", project)
        return found

    monkeypatch.setattr(*step, then_erase)
    # When
    job_runner().run(
        ExtractJob(user_id=bob.sub or "", project_id=project, conversation_id=threads[1])
    )
    # Then
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_a_thread_created_while_its_owner_is_erased_is_not_saved(
    alice: Api, bob: Api, shared: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given bob creating a thread, his role read, and his erasure landing before the write
    project, _ = shared
    threads = fill(bob, project)
    client = dynamodb_client()
    transact = client.transact_write_items
    racing = [True]

    def erase_first(**kwargs: Any) -> Any:
        if racing:
            racing.clear()
            assert erasure_service().erase_me(bob.sub or "", project)
        return transact(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", erase_first)
    # When
    reply = bob.post(f"/projects/{project}/conversations", {"title": "Late idea"})
    monkeypatch.undo()
    # Then
    assert reply.status == 403, reply
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_two_owners_erasing_themselves_at_once_leave_the_project_an_owner(
    alice: Api, bob: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two owners, each of whom has read that the other is still an owner
    project = make_project(alice, {bob: "owner"})
    transactions_after_every_racer_read(monkeypatch, 2)
    answers: dict[str, str] = {}

    def erase(api: Api) -> None:
        try:
            erasure_service().erase_me(api.sub or "", project)
            answers[api.sub or ""] = "erased"
        except Conflict:
            answers[api.sub or ""] = "conflict"

    racers = [threading.Thread(target=erase, args=(api,)) for api in (alice, bob)]
    # When
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    monkeypatch.undo()
    # Then one was erased, the other refused, and the project still has its owner
    assert sorted(answers.values()) == ["conflict", "erased"]
    [kept] = [user for user, outcome in answers.items() if outcome == "conflict"]
    assert project_store().role_of(project, kept) is not None
    assert project_store().get(project).owner_count == 1  # type: ignore[union-attr]


def test_a_member_an_owner_removed_can_still_erase_what_they_left(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given bob's data in a project, and bob removed from it by its owner
    project = make_project(alice, {bob: "editor"})
    threads = fill(bob, project)
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    assert bob.get(f"/projects/{project}/conversations").status == 403
    # When he erases his data there
    reply = bob.delete(f"/projects/{project}/me")
    # Then nothing of his is left, and added back he finds none of it
    assert reply.status == 204, reply
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"}).status == 201
    assert bob.get(f"/projects/{project}/conversations").body["conversations"] == []


def test_deleting_a_project_erases_the_data_of_members_removed_from_it(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject
) -> None:
    # Given bob's data in a project he was removed from, and carol removed with none
    project = make_project(alice, {bob: "editor", carol: "viewer"})
    threads = fill(bob, project)
    for api in (bob, carol):
        assert alice.delete(f"/projects/{project}/members/{api.sub}").status == 204
    # When the owner deletes the project
    assert alice.delete(f"/projects/{project}").status == 204
    # Then nothing of theirs is left in any table
    assert nothing(held(bob.sub or "", project, threads))
    for api in (bob, carol):
        assert mentions(api.sub or "", project) == []


def test_a_member_removed_and_added_back_finds_their_threads_as_they_were(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given bob's threads in a project, and bob removed from it
    project = make_project(alice, {bob: "editor"})
    threads = fill(bob, project)
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    # When he is added back
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"}).status == 201
    # Then his threads are his again, and he is no former member any more: erasing himself
    # now is a member's erasure, which removes his membership too
    listed = bob.get(f"/projects/{project}/conversations").body["conversations"]
    assert sorted(row["id"] for row in listed) == sorted(threads)
    assert markers().begin_former_erasure(project, bob.sub or "") is False
    assert bob.delete(f"/projects/{project}/me").status == 204
    assert mentions(bob.sub or "", project) == []


def test_a_keyed_turn_that_saved_just_before_its_callers_erasure_leaves_no_record_behind(
    alice: Api, bob: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given bob's keyed turn, saved, and his erasure landing before its record is completed
    project = make_project(alice, {bob: "editor"})
    turn = ChatService.turn

    def erased_before_the_record_completes(self: ChatService, *args: Any, **kwargs: Any) -> Any:
        answer = turn(self, *args, **kwargs)
        assert erasure_service().erase_me(bob.sub or "", project)
        return answer

    monkeypatch.setattr(ChatService, "turn", erased_before_the_record_completes)
    # When
    reply = bob.post(
        f"/projects/{project}/chat",
        {"message": "Plan the spring launch."},
        headers={"Idempotency-Key": "k-1"},
    )
    # Then the turn answered, and its reply was not written back under bob in the project
    assert reply.status == 200, reply
    assert mentions(bob.sub or "", project) == []


class Requests:
    """How many requests botocore sends on the store's and the exports' clients."""

    def __init__(self) -> None:
        self.sent = 0

    def __call__(self, **_: Any) -> None:
        self.sent += 1


@pytest.fixture
def requests_sent() -> Iterator[Requests]:
    counted = Requests()
    clients = [dynamodb_client(), s3_client()]
    for client in clients:
        client.meta.events.register("before-call", counted, unique_id="erase-requests")
    yield counted
    for client in clients:
        client.meta.events.unregister("before-call", unique_id="erase-requests")


def run_bound() -> int:
    """The requests one erasure run may send: ERASE_ITEMS_PER_RUN pays for deletes in
    batches of 25 and for the requests that delete nothing, ERASE_REQUEST_ITEMS each, and a
    few reads begin and end a run."""
    settings = get_settings()
    budget = settings.erase_items_per_run
    return budget // settings.erase_request_items + budget // settings.delete_batch_size + 20


def project_items(project: str) -> list[Any]:
    """Everything under the project's partition of the Projects table: the project item,
    members, former members, erasure markers, presets."""
    items: list[Any] = dynamodb_client().query(
        TableName=get_settings().projects_table,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": "projectId"},
        ExpressionAttributeValues={":pk": to_value(project)},
        ConsistentRead=True,
    )["Items"]
    return items


def test_deleting_a_project_of_many_members_with_no_data_hands_on_within_a_bounded_run(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    requests_sent: Requests,
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given a project of 80 members without any data, ten members an owner removed, and
    # bob with data of his own
    project = make_project(alice, {bob: "editor"})
    threads = fill(bob, project)
    viewers = [f"viewer-{n:03d}-{project}" for n in range(80)]
    for user in viewers:
        assert alice.put(f"/projects/{project}/members/{user}", {"role": "viewer"}).status == 201
    for user in viewers[:10]:
        assert alice.delete(f"/projects/{project}/members/{user}").status == 204
    # When the owner deletes it
    requests_sent.sent = 0
    reply = alice.delete(f"/projects/{project}")
    # Then the request stops within its run's budget and hands the rest to the worker
    assert reply.status == 202, reply
    assert requests_sent.sent <= run_bound(), requests_sent.sent
    assert alice.get(f"/projects/{project}").status == 403
    # When the worker goes on, each run bounded the same way and queueing the next
    job = EraseJob(user_id=alice.sub or "", project_id=project, whole_project=True)
    runs = 0
    while True:
        requests_sent.sent = 0
        done = erasure_service().resume(job)
        assert requests_sent.sent <= run_bound(), requests_sent.sent
        runs += 1
        if done:
            break
        assert runs < 20, "the erasure never finished"
    for poller in background.pollers(embedded_store):
        poller.drain(deadline_seconds=30)
    # Then it took more than one run, and nothing of the project is left: no member,
    # former member, erasure marker, nor bob's data
    assert runs > 1
    assert project_items(project) == []
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_erasing_yourself_with_many_empty_threads_hands_on_within_a_bounded_run(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    requests_sent: Requests,
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given bob's 100 threads without a message (each "new chat" he never used)
    project = make_project(alice, {bob: "editor"})
    threads = [
        bob.post(f"/projects/{project}/conversations", {"title": f"t{n}"}).body["id"]
        for n in range(100)
    ]
    # When bob erases his data
    requests_sent.sent = 0
    reply = bob.delete(f"/projects/{project}/me")
    # Then the request stops within its run's budget and the worker finishes it
    assert reply.status == 202, reply
    assert requests_sent.sent <= run_bound(), requests_sent.sent
    for poller in background.pollers(embedded_store):
        poller.drain(deadline_seconds=60)
    assert nothing(held(bob.sub or "", project, threads))
    assert mentions(bob.sub or "", project) == []


def test_members_with_the_longest_user_ids_erase_themselves_and_delete_their_project(
    alice: Api, make_project: MakeProject
) -> None:
    # Given two members whose ids are as long as a token's sub may be, one an owner, each
    # with data in the project
    leaver, owner = longest_user("u"), longest_user("o")
    project = make_project(alice, {leaver: "editor", owner: "owner"})
    threads = {api: fill(api, project) for api in (leaver, owner)}
    # When one erases their data, and the other deletes the project (every key of an
    # erasure, its ERASING#<userId> marker too, within DynamoDB's limits)
    left = leaver.delete(f"/projects/{project}/me")
    deleted = owner.delete(f"/projects/{project}")
    # Then both are done, and nothing of either is left
    assert (left.status, deleted.status) == (204, 204), (left, deleted)
    for api, ids in threads.items():
        assert nothing(held(api.sub or "", project, ids))
        assert mentions(api.sub or "", project) == []
    assert project_store().get(project) is None


def test_the_longest_user_id_exports_a_large_export_and_its_erasure_takes_it(
    alice: Api, make_project: MakeProject, export_settings: Callable[..., None]
) -> None:
    # Given a member whose id is as long as a token's sub may be, in two-byte letters
    # (three times as long URL-quoted), and a large export of theirs
    member = longest_user("ж")
    project = make_project(alice, {member: "editor"})
    threads = fill(member, project)
    export_settings(export_max_bytes=0)
    # When they export the project, then erase their data in it
    exported = member.get(f"/projects/{project}/export")
    # Then the export is written to the bucket (its key within S3's 1,024 bytes)
    assert exported.status == 200, exported
    assert exported.body["format"] == "recall.export.jsonl"
    assert exported_objects(member.sub or "", project)
    # And their erasure finds it and takes it with the rest
    assert member.delete(f"/projects/{project}/me").status == 204
    assert nothing(held(member.sub or "", project, threads))
