"""The Projects table's members: adding, changing and removing one (with the owner and
member counts that move in the same transaction, so a project is never left without an
owner nor passes ``MEMBERS_MAX`` under concurrent adds), a member's budget, and the reads
of a project's items by sort-key prefix. ``ProjectStore`` (``store/projects.py``) extends
this with the project itself; both are checked against the caller's role by the write."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain.access import Role
from recall.domain.projects import Member
from recall.domain.usage import Budget
from recall.errors import Conflict, Forbidden, NotFound
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    dynamodb_client,
    error_code,
    from_item,
    to_value,
    translate,
)
from recall.store.keys import MEMBER_PREFIX
from recall.store.project_items import (
    ROLE_LOST,
    STILL_ERASING,
    MemberItem,
    ProjectItem,
    erasing_key,
    failed_at,
    former_key,
    member_key,
    project_key,
    role_among,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ProjectMembers:
    """The client, the project item as stored, and every write of a member's item, each
    checked against the caller's role in its own transaction."""

    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.projects_table
        self._client = client
        self._batch_attempts = settings.batch_retry_attempts
        self._batch_base_seconds = settings.batch_retry_base_seconds
        self._retry_after = settings.retry_after_seconds
        self._members_max = settings.members_max

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table

    def _stored(self, project_id: str) -> ProjectItem | None:
        item = self.client.get_item(
            TableName=self._table, Key=project_key(project_id), ConsistentRead=True
        ).get("Item")
        return ProjectItem.model_validate(from_item(item)) if item else None

    def set_budget(self, project_id: str, user_id: str, budget: Budget, caller_id: str) -> Member:
        """Set (or with an empty ``budget`` clear) a member's budget, only while they are a
        member and ``caller_id`` is still an owner, both checked by the write."""
        names = {"#sk": "sk", "#budget": "budget"}
        values: dict[str, Any] = {}
        if budget.empty():
            expression = "REMOVE #budget"
        else:
            expression = "SET #budget = :budget"
            values[":budget"] = to_value(budget.model_dump(by_alias=True, exclude_none=True))
        condition = "attribute_exists(#sk)"
        if user_id == caller_id:
            role_in, role_values = role_among(frozenset({Role.OWNER}))
            condition = f"{condition} AND {role_in}"
            names["#role"] = "role"
            values.update(role_values)
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": member_key(project_id, user_id),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            update["ExpressionAttributeValues"] = values
        items: Any = [{"Update": update}]
        if user_id != caller_id:
            items.append(self.caller_check(project_id, caller_id, frozenset({Role.OWNER})))
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if failed_at(exc, 1) or (user_id == caller_id and failed_at(exc, 0)):
                raise Forbidden(ROLE_LOST) from exc
            if failed_at(exc, 0):
                raise NotFound("No such member.") from exc
            raise translate(exc) from exc
        item = self.client.get_item(
            TableName=self._table, Key=member_key(project_id, user_id), ConsistentRead=True
        ).get("Item")
        if item is None:
            raise NotFound("No such member.")
        return MemberItem.model_validate(from_item(item)).member()

    def members_counted(self, project_id: str) -> int:
        """How many members the project has. A project made before the count was kept is
        counted now, once: its member items are counted and the count set only while it is
        still absent, and every change that moves the count requires it to exist, so no
        member is added or removed between the two."""
        stored = self._stored(project_id)
        if stored is None:
            raise NotFound("No such project.")
        if stored.member_count is not None:
            return stored.member_count
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": "projectId", "#sk": "sk"},
            ExpressionAttributeValues={
                ":pk": to_value(project_id),
                ":prefix": to_value(MEMBER_PREFIX),
            },
            ConsistentRead=True,
            Select="COUNT",
        )
        counted = sum(page["Count"] for page in pages)
        try:
            self.client.update_item(
                TableName=self._table,
                Key=project_key(project_id),
                UpdateExpression="SET #members = :counted",
                ConditionExpression="attribute_exists(#pk) AND attribute_not_exists(#members)",
                ExpressionAttributeNames={"#members": "memberCount", "#pk": "projectId"},
                ExpressionAttributeValues={":counted": to_value(counted)},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise translate(exc) from exc
            # Counted meanwhile by another change, or the project is gone: read it again.
            stored = self._stored(project_id)
            if stored is None or stored.member_count is None:
                raise NotFound("No such project.") from exc
            return stored.member_count
        return counted

    def members(self, project_id: str) -> list[Member]:
        return [
            MemberItem.model_validate(from_item(item)).member()
            for item in self._under(project_id, MEMBER_PREFIX)
        ]

    def change_member(
        self,
        member: Member,
        before: Role | None,
        after: Role | None,
        owner_delta: int,
        *,
        caller_id: str,
        caller_roles: frozenset[Role],
    ) -> None:
        """Set (``after``) or remove (``after is None``) a member, only if their role is still
        ``before``, moving the owner count in the same transaction so a project can never be
        left without an owner (and the member count, so it never passes MEMBERS_MAX), and
        only while ``caller_id`` still has one of ``caller_roles``: an owner removed or
        demoted since their role was read is refused (Forbidden). A caller changing
        themselves is checked on their own item, which one transaction may name only once."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if before is None:
            condition = "attribute_not_exists(#sk)"
            names["#sk"] = "sk"
        else:
            condition = "#role = :before"
            names["#role"] = "role"
            values[":before"] = to_value(before.value)
        checks_caller = member.user_id != caller_id
        if not checks_caller:
            role_in, role_values = role_among(caller_roles)
            condition = f"{condition} AND {role_in}"
            names["#role"] = "role"
            values.update(role_values)
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
        elif before is None:
            change = {
                "Put": {
                    "TableName": self._table,
                    "Item": MemberItem.of(member.model_copy(update={"role": after})).item(),
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    **({"ExpressionAttributeValues": values} if values else {}),
                }
            }
        else:
            # An update, not a put: a role change keeps the member's budget and addedAt.
            names["#role"] = "role"
            values[":after"] = to_value(after.value)
            change = {
                "Update": {
                    "TableName": self._table,
                    "Key": member_key(member.project_id, member.user_id),
                    "UpdateExpression": "SET #role = :after",
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        project_update: Any = {
            "Update": {
                "TableName": self._table,
                "Key": project_key(member.project_id),
                "UpdateExpression": "ADD #owners :delta",
                "ConditionExpression": (
                    "attribute_exists(#pk) AND attribute_not_exists(#erasing) AND #owners >= :least"
                ),
                "ExpressionAttributeNames": {
                    "#owners": "ownerCount",
                    "#pk": "projectId",
                    "#erasing": "erasing",
                },
                "ExpressionAttributeValues": {
                    ":delta": to_value(owner_delta),
                    ":least": to_value(1 - owner_delta),
                },
            }
        }
        # An add or a removal moves the member count too, which the caller has made sure is
        # kept (``members_counted``): an add only while it is below MEMBERS_MAX.
        joins = 1 if before is None else -1 if after is None else 0
        if joins:
            update = project_update["Update"]
            update["UpdateExpression"] += ", #members :joins"
            update["ConditionExpression"] += " AND attribute_exists(#members)"
            update["ExpressionAttributeNames"]["#members"] = "memberCount"
            update["ExpressionAttributeValues"][":joins"] = to_value(joins)
            if joins > 0:
                update["ConditionExpression"] += " AND #members < :max"
                update["ExpressionAttributeValues"][":max"] = to_value(self._members_max)
        items = [change, project_update]
        if checks_caller:
            items.append(self.caller_check(member.project_id, caller_id, caller_roles))
        former = former_key(member.project_id, member.user_id)
        if after is None:
            items.append({"Put": {"TableName": self._table, "Item": former}})
        if before is None:
            items.append({"Delete": {"TableName": self._table, "Key": former}})
            items.append(self._not_erasing(member.project_id, member.user_id))
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if checks_caller and failed_at(exc, 2):
                raise Forbidden(ROLE_LOST) from exc
            if before is None and failed_at(exc, len(items) - 1):
                raise Conflict(STILL_ERASING, retry_after=self._retry_after) from exc
            raise translate(exc, "The project's members changed meanwhile.") from exc

    def _not_erasing(self, project_id: str, user_id: str) -> Any:
        """A transaction item that holds only while no erasure of ``user_id`` is under way,
        so nobody is added back into data that is still being deleted."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": erasing_key(project_id, user_id),
                "ConditionExpression": "attribute_not_exists(#sk)",
                "ExpressionAttributeNames": {"#sk": "sk"},
            }
        }

    def users_under(self, project_id: str, prefix: str, limit: int | None = None) -> list[str]:
        """The user ids of the project's items under ``prefix``: the first ``limit``, or
        all."""
        return [
            str(from_item(item)["sk"]).removeprefix(prefix)
            for item in self._under(project_id, prefix, limit)
        ]

    def _under(self, project_id: str, prefix: str, limit: int | None = None) -> Iterator[Item]:
        """Every item of the project whose sort key starts with ``prefix`` (the first
        ``limit``, when given), page by page."""
        bound: dict[str, Any] = {}
        if limit is not None:
            bound["PaginationConfig"] = {"MaxItems": limit, "PageSize": limit}
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": "projectId", "#sk": "sk"},
            ExpressionAttributeValues={":pk": to_value(project_id), ":prefix": to_value(prefix)},
            ConsistentRead=True,
            **bound,
        )
        for page in pages:
            yield from page["Items"]

    def caller_check(self, project_id: str, caller_id: str, roles: frozenset[Role]) -> Any:
        """A transaction item that holds only while ``caller_id``'s role is one of ``roles``."""
        return {"ConditionCheck": self._role_condition(project_id, caller_id, roles)}

    def _role_condition(
        self, project_id: str, user_id: str, roles: frozenset[Role]
    ) -> dict[str, Any]:
        condition, values = role_among(roles)
        return {
            "TableName": self._table,
            "Key": member_key(project_id, user_id),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#role": "role"},
            "ExpressionAttributeValues": values,
        }
