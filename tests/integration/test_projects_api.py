"""Projects and members through the real handler, over the embedded DynamoDB."""

from __future__ import annotations

from collections.abc import Callable
import threading
from typing import Any

import pytest

from recall.domain.access import Role
from recall.errors import Conflict, Forbidden
from recall.wiring import project_service, project_store
from tests.integration.conftest import Api, transactions_after_every_racer_read


def test_creator_becomes_owner_and_sees_project_in_list(alice: Api) -> None:
    # When
    created = alice.post("/projects", {"name": "Corner Shop", "context": {"currency": "EUR"}})
    # Then
    assert created.status == 201
    assert created.body["role"] == "owner"
    assert created.body["context"] == {"currency": "EUR"}
    listed = alice.get("/projects")
    assert [p["id"] for p in listed.body["projects"]] == [created.body["id"]]
    members = alice.get(f"/projects/{created.body['id']}/members")
    assert members.body["members"] == [
        {
            "userId": alice.sub,
            "role": "owner",
            "addedAt": members.body["members"][0]["addedAt"],
            "budget": None,
        }
    ]


def test_non_member_gets_403_on_every_project_route(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    project = make_project(alice)
    for reply in (
        bob.get(f"/projects/{project}"),
        bob.patch(f"/projects/{project}", {"name": "Mine now"}),
        bob.get(f"/projects/{project}/members"),
        bob.put(f"/projects/{project}/members/{bob.sub}", {"role": "owner"}),
        bob.delete(f"/projects/{project}/members/{alice.sub}"),
    ):
        assert reply.status == 403, reply
        assert reply.body["error"]["code"] == "forbidden"


def test_request_without_identity_is_401(as_user: Callable[[str | None], Api]) -> None:
    reply = as_user(None).get("/projects")
    assert reply.status == 401
    assert reply.body["error"]["code"] == "unauthenticated"


def test_malformed_json_is_400_and_bad_fields_are_422(alice: Api) -> None:
    malformed = alice.post("/projects", "{not json")
    assert malformed.status == 400
    assert malformed.body["error"]["code"] == "malformed_json"
    missing = alice.post("/projects", {"context": {}})
    assert missing.status == 422
    assert missing.body["error"]["details"][0]["field"] == "name"
    bad_context = alice.post("/projects", {"name": "x", "context": {"has space": 1}})
    assert bad_context.status == 422


def test_only_owners_manage_members(
    alice: Api, bob: Api, carol: Api, make_project: Callable[..., str]
) -> None:
    project = make_project(alice, {bob: "editor"})
    assert bob.put(f"/projects/{project}/members/{carol.sub}", {"role": "viewer"}).status == 403
    assert bob.delete(f"/projects/{project}/members/{alice.sub}").status == 403
    added = alice.put(f"/projects/{project}/members/{carol.sub}", {"role": "viewer"})
    assert added.status == 201
    changed = alice.put(f"/projects/{project}/members/{carol.sub}", {"role": "editor"})
    assert changed.status == 200
    assert changed.body["role"] == "editor"
    assert carol.get(f"/projects/{project}").body["role"] == "editor"
    assert alice.delete(f"/projects/{project}/members/{carol.sub}").status == 204
    assert carol.get(f"/projects/{project}").status == 403
    assert alice.delete(f"/projects/{project}/members/{carol.sub}").status == 404


def test_a_project_always_keeps_an_owner(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    project = make_project(alice, {bob: "editor"})
    # The last owner can neither leave nor step down
    assert alice.delete(f"/projects/{project}/members/{alice.sub}").status == 409
    demoted = alice.put(f"/projects/{project}/members/{alice.sub}", {"role": "editor"})
    assert demoted.status == 409
    assert "owner" in demoted.body["error"]["message"]
    # With a second owner, the first may step down
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "owner"}).status == 200
    assert alice.put(f"/projects/{project}/members/{alice.sub}", {"role": "viewer"}).status == 200
    assert bob.delete(f"/projects/{project}/members/{bob.sub}").status == 409
    roles = {
        m["userId"]: m["role"] for m in bob.get(f"/projects/{project}/members").body["members"]
    }
    assert roles == {alice.sub: "viewer", bob.sub: "owner"}


def test_two_owners_demoting_each_other_at_once_leave_an_owner(
    alice: Api, bob: Api, make_project: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two owners, each about to demote the other, both having read the owner count
    # before either writes (as two Lambda instances would)
    project = make_project(alice, {bob: "owner"})
    transactions_after_every_racer_read(monkeypatch, 2)
    outcomes: dict[str, str] = {}

    def demote(actor: Api, target: Api) -> None:
        try:
            project_service().set_member(actor.sub or "", project, target.sub or "", Role.EDITOR)
            outcomes[actor.sub or ""] = "demoted"
        except (Conflict, Forbidden):  # the owner count, or the loser's own lost role
            outcomes[actor.sub or ""] = "refused"

    racers = [
        threading.Thread(target=demote, args=(alice, bob)),
        threading.Thread(target=demote, args=(bob, alice)),
    ]
    # When
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    # Then one demotion landed, the other was refused, and one owner remains
    assert sorted(outcomes.values()) == ["demoted", "refused"]
    monkeypatch.undo()
    roles = [m["role"] for m in alice.get(f"/projects/{project}/members").body["members"]]
    assert roles.count("owner") == 1, roles
    assert project_store().get(project).owner_count == 1  # type: ignore[union-attr]


def test_editor_updates_project_context_but_viewer_cannot(
    alice: Api, bob: Api, carol: Api, make_project: Callable[..., str]
) -> None:
    project = make_project(alice, {bob: "editor", carol: "viewer"}, type="store")
    updated = bob.patch(
        f"/projects/{project}",
        {"name": "Corner Shop 2", "context": {"currency": "USD", "itemCount": 3}},
    )
    assert updated.status == 200
    assert updated.body["context"] == {"currency": "USD", "itemCount": 3}
    assert carol.patch(f"/projects/{project}", {"name": "nope"}).status == 403
    assert carol.get(f"/projects/{project}").body["name"] == "Corner Shop 2"
    assert alice.patch(f"/projects/{project}", {}).status == 422


def test_a_user_lists_only_the_projects_they_belong_to(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    mine = make_project(alice)
    shared = make_project(bob, {alice: "viewer"})
    bobs_own = make_project(bob)
    listed = {p["id"]: p["role"] for p in alice.get("/projects").body["projects"]}
    assert listed == {mine: "owner", shared: "viewer"}
    assert bobs_own not in listed


def test_a_member_id_of_any_characters_but_a_slash_and_hash_reaches_the_route(
    alice: Api, make_project: Callable[..., str]
) -> None:
    # API Gateway decodes the path, so a segment can hold what a route pattern may not expect
    project = make_project(alice)
    for member in ('auth0|bob "x"', "zoë😀?", "back\\slash", "tab\tbed"):
        added = alice.put(f"/projects/{project}/members/{member}", {"role": "viewer"})
        assert added.status == 201, (member, added)
        assert added.body["userId"] == member
    for member in ("a#b", " ", "\t"):
        refused = alice.put(f"/projects/{project}/members/{member}", {"role": "viewer"})
        assert refused.status == 422, (member, refused)


def test_a_bad_role_is_422_listing_the_roles(
    alice: Api, bob: Api, make_project: Callable[..., str]
) -> None:
    project = make_project(alice)
    reply = alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "admin"})
    assert reply.status == 422
    assert "owner" in reply.body["error"]["details"][0]["message"]


def test_a_body_that_is_not_json_is_415_never_500(alice: Api) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        reply = alice.post("/projects", '{"name": "x"}', headers={"content-type": content_type})
        assert reply.status == 415, (content_type, reply)
        assert reply.body["error"]["code"] == "unsupported_media_type"


def test_a_json_media_type_is_read_in_any_case_and_only_exactly(
    alice: Api, make_project: Callable[..., str]
) -> None:
    # Media types are case-insensitive (RFC 9110 8.3.1); their parameters may follow
    project = make_project(alice)
    for content_type in (
        "Application/JSON",
        "APPLICATION/JSON; charset=UTF-8",
        " application/json ",
    ):
        headers = {"content-type": content_type}
        created = alice.post("/projects", {"name": "x"}, headers=headers)
        assert created.status == 201, (content_type, created)
        said = alice.post(f"/projects/{project}/chat", {"message": "hi"}, headers=headers)
        assert said.status == 200, (content_type, said)
        thread = alice.post(f"/projects/{project}/conversations", None, headers=headers)
        assert thread.status == 201, (content_type, thread)
    # and a type that only starts like JSON's is not JSON
    for content_type in ("application/jsonx", "application/json-patch+json"):
        reply = alice.post("/projects", {"name": "x"}, headers={"content-type": content_type})
        assert reply.status == 415, (content_type, reply)


def test_a_422_names_each_field_as_the_client_sent_it_once(
    alice: Api, make_project: Callable[..., str]
) -> None:
    project = make_project(alice)

    def fields(reply: Any) -> list[str]:
        assert reply.status == 422, reply
        return [detail["field"] for detail in reply.body["error"]["details"]]

    # a query parameter by its name, as a domain check names it
    assert fields(alice.get(f"/projects/{project}/conversations", query="limit=abc")) == ["limit"]
    assert fields(alice.get(f"/projects/{project}/conversations", query="limit=0")) == ["limit"]
    # a value that fits no branch of a union: once, without the branches pydantic tried
    nested = alice.patch(f"/projects/{project}", {"context": {"a": {"b": 1}}})
    assert fields(nested) == ["context.a"]
    # an import's fields without the format tag in front
    role = {"role": "bot", "content": "c", "createdAt": "2025-01-01T00:00:00Z"}
    threads = {"format": "threads", "threads": [{"title": "t", "messages": [role]}]}
    assert fields(alice.post(f"/projects/{project}/import", threads)) == [
        "threads.0.messages.0.role"
    ]
    export = {"format": "recall.export", "version": 2, "conversations": []}
    assert "exportedAt" in fields(alice.post(f"/projects/{project}/import", export))


def test_an_oversized_body_is_413(alice: Api) -> None:
    reply = alice.post("/projects", {"name": "x", "context": {"notes": "x" * 300_000}})
    assert reply.status == 413
    assert reply.body["error"]["code"] == "payload_too_large"


def test_a_project_name_of_120_characters_is_kept_and_one_of_121_is_422(alice: Api) -> None:
    kept = alice.post("/projects", {"name": "p" * 120})
    over = alice.post("/projects", {"name": "q" * 121})
    assert kept.status == 201, kept
    assert kept.body["name"] == "p" * 120
    assert over.status == 422
    assert over.body["error"]["details"][0]["field"] == "name"


def test_a_context_value_of_500_characters_is_kept_and_one_of_501_is_422(alice: Api) -> None:
    kept = alice.post("/projects", {"name": "Shop", "context": {"about": "a" * 500}})
    over = alice.post("/projects", {"name": "Shop", "context": {"about": "b" * 501}})
    assert kept.status == 201, kept
    assert kept.body["context"] == {"about": "a" * 500}
    assert over.status == 422
    assert over.body["error"]["details"][0]["field"] == "context.about"
