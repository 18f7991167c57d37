"""The projects store over the embedded DynamoDB: the items existing data depends on, and a
listing that meets throttling at the boto3 edge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from recall.errors import Throttled
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client, from_item, to_item
from recall.store.projects import ProjectStore
from tests.integration.conftest import Api

RUNAWAY = 100


class UnprocessedKeys:
    """The real client, except that BatchGetItem processes at most ``processed`` keys a
    call and hands the rest back unprocessed, as DynamoDB does under throttling."""

    def __init__(self, processed: int) -> None:
        self.real = dynamodb_client()
        self.processed = processed
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> Any:
        self.calls += 1
        if self.calls > RUNAWAY:
            raise AssertionError("the batch read never stopped")
        ((table, read),) = RequestItems.items()
        now, later = read["Keys"][: self.processed], read["Keys"][self.processed :]
        found: dict[str, Any] = {table: []}
        if now:
            answer = self.real.batch_get_item(RequestItems={table: {**read, "Keys": now}})
            found = answer["Responses"]
        return {
            "Responses": found,
            "UnprocessedKeys": {table: {**read, "Keys": later}} if later else {},
        }


def store_over(client: UnprocessedKeys, attempts: int) -> ProjectStore:
    settings = get_settings().model_copy(
        update={"batch_retry_attempts": attempts, "batch_retry_base_seconds": 0.0}
    )
    return ProjectStore(settings, client)  # type: ignore[arg-type]


def test_project_and_member_items_keep_their_attribute_names(alice: Api) -> None:
    # Given a project made through the API
    context = {"currency": "EUR", "itemCount": 42, "rate": 1.5, "open": True}
    project = alice.post("/projects", {"name": "Corner Shop", "context": context}).body["id"]
    table = get_settings().projects_table

    # When its items are read as DynamoDB holds them
    def raw(sk: str) -> dict[str, Any]:
        key = to_item({"projectId": project, "sk": sk})
        return from_item(dynamodb_client().get_item(TableName=table, Key=key)["Item"])

    project_item, member_item = raw("PROJECT"), raw(f"MEMBER#{alice.sub}")
    # Then the names existing data and the byMember index depend on are unchanged
    assert set(project_item) == {
        *("projectId", "sk", "name", "context", "ownerCount"),
        *("createdBy", "createdAt", "updatedAt"),
        # the project's default thread settings, how many presets and members it has
        *("settings", "presetCount", "memberCount"),
    }
    assert project_item["context"] == context and project_item["ownerCount"] == 1
    assert set(member_item) == {"projectId", "sk", "memberId", "role", "addedAt"}
    assert member_item["memberId"] == alice.sub and member_item["role"] == "owner"


def test_listing_projects_retries_the_keys_a_batch_read_left_unprocessed(
    alice: Api, make_project: Callable[..., str]
) -> None:
    # Given three projects, and a store that reads one key per BatchGetItem
    made = {make_project(alice) for _ in range(3)}
    client = UnprocessedKeys(processed=1)
    # When
    rows, _ = store_over(client, attempts=5).projects_of(alice.sub or "", 50, None)
    # Then every project is listed, read over three calls
    assert {project.project_id for project, _ in rows} == made
    assert client.calls == 3


def test_listing_projects_under_lasting_throttling_is_throttled_not_a_spin(
    alice: Api, make_project: Callable[..., str]
) -> None:
    # Given a project, and a store whose batch reads never get through
    make_project(alice)
    client = UnprocessedKeys(processed=0)
    # When / Then: it gives up after the bound
    with pytest.raises(Throttled):
        store_over(client, attempts=3).projects_of(alice.sub or "", 50, None)
    assert client.calls == 3
