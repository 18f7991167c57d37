"""The Projects table: the project item (``sk = PROJECT``) and one item per member
(``sk = MEMBER#<userId>``, also indexed by ``memberId`` to list a user's projects)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain.access import Role
from recall.domain.projects import Member, Project
from recall.errors import Conflict, NotFound
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    decode_cursor,
    dynamodb_client,
    encode_cursor,
    from_item,
    to_item,
    to_value,
    translate,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PROJECT_SK = "PROJECT"
MEMBER_PREFIX = "MEMBER#"
BY_MEMBER = "byMember"


def project_key(project_id: str) -> Item:
    return to_item({"projectId": project_id, "sk": PROJECT_SK})


def member_key(project_id: str, user_id: str) -> Item:
    return to_item({"projectId": project_id, "sk": MEMBER_PREFIX + user_id})


def _project_from(item: Item) -> Project:
    values = from_item(item)
    return Project(
        project_id=values["projectId"],
        name=values["name"],
        context=values.get("context", {}),
        owner_count=values.get("ownerCount", 1),
        created_by=values["createdBy"],
        created_at=values["createdAt"],
        updated_at=values["updatedAt"],
    )


def _member_from(item: Item) -> Member:
    values = from_item(item)
    return Member(
        project_id=values["projectId"],
        user_id=values["memberId"],
        role=Role(values["role"]),
        added_at=values.get("addedAt", ""),
    )


def _member_item(member: Member) -> Item:
    return {
        **member_key(member.project_id, member.user_id),
        **to_item(
            {"memberId": member.user_id, "role": member.role.value, "addedAt": member.added_at}
        ),
    }


class ProjectStore:
    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.projects_table
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def create(self, project: Project, owner: Member) -> None:
        project_item = {
            **project_key(project.project_id),
            **to_item(
                {
                    "name": project.name,
                    "context": project.context,
                    "ownerCount": 1,
                    "createdBy": project.created_by,
                    "createdAt": project.created_at,
                    "updatedAt": project.updated_at,
                }
            ),
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": project_item,
                            "ConditionExpression": "attribute_not_exists(#pk)",
                            "ExpressionAttributeNames": {"#pk": "projectId"},
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": _member_item(owner)}},
                ]
            )
        except ClientError as exc:
            raise translate(exc, "A project with this id already exists.") from exc

    def get(self, project_id: str) -> Project | None:
        item = self.client.get_item(
            TableName=self._table, Key=project_key(project_id), ConsistentRead=True
        ).get("Item")
        return _project_from(item) if item else None

    def role_of(self, project_id: str, user_id: str) -> Role | None:
        item = self.client.get_item(
            TableName=self._table, Key=member_key(project_id, user_id), ConsistentRead=True
        ).get("Item")
        return Role(from_item(item)["role"]) if item else None

    def project_and_role_keys(self, project_id: str, user_id: str) -> list[Item]:
        """Keys for a caller's batched read of a project and their own role on it."""
        return [project_key(project_id), member_key(project_id, user_id)]

    def read_project_and_role(self, items: list[Item]) -> tuple[Project | None, Role | None]:
        project: Project | None = None
        role: Role | None = None
        for item in items:
            if from_item({"sk": item["sk"]})["sk"] == PROJECT_SK:
                project = _project_from(item)
            else:
                role = Role(from_item(item)["role"])
        return project, role

    @property
    def table(self) -> str:
        return self._table

    def update(
        self, project_id: str, name: str | None, context: dict[str, Any] | None, updated_at: str
    ) -> Project:
        sets = ["#updatedAt = :updatedAt"]
        names = {"#pk": "projectId", "#updatedAt": "updatedAt"}
        values: dict[str, Any] = {":updatedAt": to_value(updated_at)}
        if name is not None:
            sets.append("#name = :name")
            names["#name"] = "name"
            values[":name"] = to_value(name)
        if context is not None:
            sets.append("#context = :context")
            names["#context"] = "context"
            values[":context"] = to_value(context)
        try:
            result = self.client.update_item(
                TableName=self._table,
                Key=project_key(project_id),
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            error = translate(exc)
            if isinstance(error, Conflict):
                raise NotFound("No such project.") from exc
            raise error from exc
        return _project_from(result["Attributes"])

    def projects_of(
        self, user_id: str, limit: int, cursor: str | None
    ) -> tuple[list[tuple[Project, Role]], str | None]:
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": BY_MEMBER,
            "KeyConditionExpression": "#member = :member",
            "ExpressionAttributeNames": {"#member": "memberId"},
            "ExpressionAttributeValues": {":member": to_value(user_id)},
            "Limit": limit,
        }
        if cursor:
            start = decode_cursor(cursor, {"projectId"})
            query["ExclusiveStartKey"] = {
                **member_key(start["projectId"], user_id),
                **to_item({"memberId": user_id}),
            }
        page = self.client.query(**query)
        roles = {
            from_item(item)["projectId"]: Role(from_item(item)["role"]) for item in page["Items"]
        }
        projects = self._batch_get_projects(list(roles))
        rows = [(projects[pid], roles[pid]) for pid in roles if pid in projects]
        last = page.get("LastEvaluatedKey")
        next_cursor = encode_cursor({"projectId": from_item(last)["projectId"]}) if last else None
        return rows, next_cursor

    def _batch_get_projects(self, project_ids: list[str]) -> dict[str, Project]:
        found: dict[str, Project] = {}
        keys: list[Any] = [project_key(pid) for pid in project_ids]
        while keys:
            result = self.client.batch_get_item(RequestItems={self._table: {"Keys": keys[:100]}})
            for item in result["Responses"].get(self._table, []):
                project = _project_from(item)
                found[project.project_id] = project
            unprocessed: Any = result.get("UnprocessedKeys", {}).get(self._table)
            keys = keys[100:] + list(unprocessed["Keys"] if unprocessed else [])
        return found

    def members(self, project_id: str) -> list[Member]:
        members: list[Member] = []
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": "projectId", "#sk": "sk"},
            "ExpressionAttributeValues": {
                ":pk": to_value(project_id),
                ":prefix": to_value(MEMBER_PREFIX),
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.client.query(**query)
            members.extend(_member_from(item) for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                return members
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def change_member(
        self, member: Member, before: Role | None, after: Role | None, owner_delta: int
    ) -> None:
        """Set (``after``) or remove (``after is None``) a member, only if their role is still
        ``before``, moving the owner count in the same transaction so a project can never be
        left without an owner."""
        if before is None:
            condition = "attribute_not_exists(#sk)"
            names = {"#sk": "sk"}
            values: dict[str, Any] = {}
        else:
            condition = "#role = :before"
            names = {"#role": "role"}
            values = {":before": to_value(before.value)}
        change: Any
        if after is None:
            change = {
                "Delete": {
                    "TableName": self._table,
                    "Key": member_key(member.project_id, member.user_id),
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    **({"ExpressionAttributeValues": values} if values else {}),
                }
            }
        else:
            change = {
                "Put": {
                    "TableName": self._table,
                    "Item": _member_item(member.model_copy(update={"role": after})),
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    **({"ExpressionAttributeValues": values} if values else {}),
                }
            }
        project_update: Any = {
            "Update": {
                "TableName": self._table,
                "Key": project_key(member.project_id),
                "UpdateExpression": "ADD #owners :delta",
                "ConditionExpression": "attribute_exists(#pk) AND #owners >= :least",
                "ExpressionAttributeNames": {"#owners": "ownerCount", "#pk": "projectId"},
                "ExpressionAttributeValues": {
                    ":delta": to_value(owner_delta),
                    ":least": to_value(1 - owner_delta),
                },
            }
        }
        try:
            self.client.transact_write_items(TransactItems=[change, project_update])
        except ClientError as exc:
            raise translate(exc, "The project's members changed meanwhile.") from exc
