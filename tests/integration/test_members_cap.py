"""A project holds at most MEMBERS_MAX members, owners included, so the answers that list
every member (GET …/members, an owner's GET …/usage) stay inside Lambda's 6 MB response:
a new member past it is a 409, also when owners add at the same moment, and at the cap
both answers, with the longest ids and a full usage row each, are well under 6 MB."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
import threading

import pytest

from recall.api.bodies import json_bytes
from recall.domain import clock
from recall.domain.access import Role
from recall.domain.projects import Member
from recall.domain.sessions import session_step
from recall.domain.usage import Budget, Counts
from recall.errors import Conflict
from recall.settings import get_settings
from recall.store.dynamodb import batch_write, dynamodb_client, to_item, to_value
from recall.store.keys import USER_ID_MAX_BYTES
from recall.store.project_items import MemberItem
from recall.wiring import project_service, project_store, usage_store
from tests.integration.conftest import Api, new_user, transactions_after_every_racer_read

MakeProject = Callable[..., str]
LAMBDA_RESPONSE_MAX_BYTES = 6_291_456


@pytest.fixture
def members_max() -> Iterator[Callable[[int], None]]:
    """Another MEMBERS_MAX on the wired service and store, restored afterwards."""
    service, store = project_service(), project_store()
    settings, limit = service._settings, store._members_max

    def use(value: int) -> None:
        service._settings = settings.model_copy(update={"members_max": value})
        store._members_max = value

    yield use
    service._settings, store._members_max = settings, limit


def add(owner: Api, project: str, user: str, role: str = "viewer") -> int:
    return owner.put(f"/projects/{project}/members/{user}", {"role": role}).status


def test_a_full_project_refuses_a_new_member_with_409_and_still_changes_roles(
    alice: Api, bob: Api, make_project: MakeProject, members_max: Callable[[int], None]
) -> None:
    # Given a project of three members, its cap
    members_max(3)
    project = make_project(alice, {bob: "viewer"})
    assert add(alice, project, new_user()) == 201
    # When a fourth is added
    refused = alice.put(f"/projects/{project}/members/{new_user()}", {"role": "viewer"})
    # Then it is a 409 that says why, and nobody was added
    assert refused.status == 409, refused
    assert refused.body["error"]["message"] == (
        "A project has at most 3 members; remove one before adding another."
    )
    assert len(alice.get(f"/projects/{project}/members").body["members"]) == 3
    # And a member's role still changes, and removing one makes room
    assert add(alice, project, bob.sub or "", "editor") == 200
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    assert add(alice, project, new_user()) == 201
    assert add(alice, project, bob.sub or "") == 409


def test_owners_adding_members_at_once_never_pass_the_cap(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    members_max: Callable[[int], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two owners and room for one more member, both reading the count before either
    # writes (as two Lambda instances would)
    members_max(3)
    project = make_project(alice, {bob: "owner"})
    transactions_after_every_racer_read(monkeypatch, 2)
    outcomes: list[str] = []

    def add_one(owner: Api) -> None:
        try:
            project_service().set_member(owner.sub or "", project, new_user(), Role.VIEWER)
            outcomes.append("added")
        except Conflict:
            outcomes.append("refused")

    racers = [threading.Thread(target=add_one, args=(owner,)) for owner in (alice, bob)]
    # When
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    # Then one was added and the other refused
    monkeypatch.undo()
    assert sorted(outcomes) == ["added", "refused"]
    assert len(alice.get(f"/projects/{project}/members").body["members"]) == 3


def test_a_project_made_before_members_were_counted_is_counted_on_its_next_change(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject, members_max: Callable[[int], None]
) -> None:
    # Given a project of three whose item holds no member count, as one made before it did
    project = make_project(alice, {bob: "viewer", carol: "editor"})
    dynamodb_client().update_item(
        TableName=get_settings().projects_table,
        Key=to_item({"projectId": project, "sk": "PROJECT"}),
        UpdateExpression="REMOVE #members",
        ExpressionAttributeNames={"#members": "memberCount"},
    )
    members_max(4)
    # When members are added and removed
    assert add(alice, project, new_user()) == 201
    assert add(alice, project, new_user()) == 409
    assert bob.delete(f"/projects/{project}/me").status == 204
    assert add(alice, project, new_user()) == 201
    # Then the count started from the members it had
    assert add(alice, project, new_user()) == 409
    assert project_store().members_counted(project) == 4


def test_at_members_max_the_members_list_and_an_owners_usage_stay_well_under_6_mb(
    alice: Api, make_project: MakeProject
) -> None:
    # Given a project at MEMBERS_MAX whose members have the ids that take the most room
    # in JSON (each character a control character: \u0001, escaped again in Lambda's
    # payload), the highest budgets and a month of usage with every model
    settings = get_settings()
    project = make_project(alice)
    now = clock.now()
    counts = Counts(
        input_tokens=10**15,
        output_tokens=10**15,
        cache_read_tokens=10**15,
        cache_write_tokens=10**15,
        turns=10**15,
        tool_rounds=10**15,
        models=frozenset({*settings.allowed_model_ids, settings.offline_model_id}),
    )
    limit = settings.budget_max
    budget = Budget(
        tokens_per_day=limit, tokens_per_month=limit, turns_per_day=limit, turns_per_month=limit
    )
    usage, table = usage_store(), settings.projects_table
    # The longest id an add takes today: one byte less than USER_ID_MAX_BYTES, as the add
    # checks the id's ERASING# key, one byte longer than its MEMBER# key.
    longest = USER_ID_MAX_BYTES - 1
    users = [f"{n:04d}" + "\x01" * (longest - 4) for n in range(settings.members_max - 1)]
    # (written straight to the tables, with the count the adds would have left: adding
    # them and their budgets through the API takes most of a minute here)
    members = [
        Member(
            project_id=project,
            user_id=user,
            role=Role.VIEWER,
            added_at=clock.stamp(now),
            budget=budget,
        )
        for user in users
    ]
    batch_write(
        dynamodb_client(),
        table,
        [{"PutRequest": {"Item": MemberItem.of(member).item()}} for member in members],
    )
    dynamodb_client().update_item(
        TableName=table,
        Key=to_item({"projectId": project, "sk": "PROJECT"}),
        UpdateExpression="SET #members = :all",
        ExpressionAttributeNames={"#members": "memberCount"},
        ExpressionAttributeValues={":all": to_value(settings.members_max)},
    )
    idle = timedelta(seconds=settings.session_idle_seconds)
    for user in users:
        read = usage.get(user, project, now)
        session = session_step(None, False, now, counts.turns, counts.total_tokens, idle)
        dynamodb_client().transact_write_items(
            TransactItems=usage.turn_writes(user, project, read, counts, now, session)  # type: ignore[arg-type]
        )
    assert add(alice, project, new_user()) == 409
    # When the owner lists the members and reads everyone's usage
    members = alice.get(f"/projects/{project}/members")
    report = alice.get(f"/projects/{project}/usage", query="period=month")
    # Then each answer, as Lambda's payload counts it, is well under its 6 MB
    assert members.status == 200 and report.status == 200
    assert len(members.body["members"]) == len(report.body["members"]) == settings.members_max
    assert report.body["members"][1]["usage"]["turns"] == 10**15
    for answer in (members, report):
        size = json_bytes(answer.raw)
        assert size < 0.75 * LAMBDA_RESPONSE_MAX_BYTES, size
