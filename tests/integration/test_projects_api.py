"""Projects and members through the real handler, over the embedded DynamoDB."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Api


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
        {"userId": alice.sub, "role": "owner", "addedAt": members.body["members"][0]["addedAt"]}
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
