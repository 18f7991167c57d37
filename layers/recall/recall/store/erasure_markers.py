"""The Projects table's erasure markers, which hold an erasure's place while its data goes.

``ERASING#<userId>`` replaces a member item (or a former member's ``FORMER#<userId>``) in
the transaction that starts erasing that member's data, so from then on they hold no role;
``erasing`` on the project item hides a project being deleted. Each marker goes last, once
everything it stands for is gone, so a failure part-way leaves it for the retry. The keys
are the projects store's (``store/projects.py``), their prefixes ``store/keys.py``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from recall.domain.access import Role
from recall.settings import Settings
from recall.store.dynamodb import batch_delete, batch_write, to_value, translate
from recall.store.keys import ERASING_PREFIX, FORMER_PREFIX, MEMBER_PREFIX
from recall.store.project_items import (
    erasing_key,
    failed_at,
    former_key,
    member_key,
    project_change_refused,
    project_key,
)
from recall.store.projects import ProjectStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ErasureMarkers:
    def __init__(self, settings: Settings, projects: ProjectStore) -> None:
        self._projects = projects
        self._table = settings.projects_table
        self._batch_attempts = settings.batch_retry_attempts
        self._batch_base_seconds = settings.batch_retry_base_seconds

    @property
    def _client(self) -> DynamoDBClient:
        return self._projects.client

    def begin_member_erasure(
        self, project_id: str, user_id: str, role: Role, owner_delta: int
    ) -> None:
        """In one transaction: the member item (still ``role``) gives way to its erasure
        marker, the member count drops by one and the owner count moves by ``owner_delta``
        without reaching zero, so the last owner is refused (Conflict) and a turn racing
        this finds no role."""
        self._projects.members_counted(project_id)
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": member_key(project_id, user_id),
                            "ConditionExpression": "#role = :role",
                            "ExpressionAttributeNames": {"#role": "role"},
                            "ExpressionAttributeValues": {":role": to_value(role.value)},
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": erasing_key(project_id, user_id)}},
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": project_key(project_id),
                            "UpdateExpression": "ADD #owners :delta, #members :leaves",
                            "ConditionExpression": (
                                "attribute_exists(#pk) AND #owners >= :least"
                                " AND attribute_exists(#members)"
                            ),
                            "ExpressionAttributeNames": {
                                "#owners": "ownerCount",
                                "#members": "memberCount",
                                "#pk": "projectId",
                            },
                            "ExpressionAttributeValues": {
                                ":delta": to_value(owner_delta),
                                ":least": to_value(1 - owner_delta),
                                ":leaves": to_value(-1),
                            },
                        }
                    },
                ]
            )
        except ClientError as exc:
            raise translate(exc, "The project's members changed meanwhile.") from exc

    def begin_former_erasure(self, project_id: str, user_id: str) -> bool:
        """A former member's ``FORMER#`` item gives way to their erasure marker, in one
        transaction: ``False`` when ``user_id`` is no former member of the project."""
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": former_key(project_id, user_id),
                            "ConditionExpression": "attribute_exists(#sk)",
                            "ExpressionAttributeNames": {"#sk": "sk"},
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": erasing_key(project_id, user_id)}},
                ]
            )
        except ClientError as exc:
            if failed_at(exc, 0):
                return False
            raise translate(exc) from exc
        return True

    def erasure_pending(self, project_id: str, user_id: str) -> bool:
        """Whether an erasure of ``user_id``'s data in the project has begun and not ended."""
        return "Item" in self._client.get_item(
            TableName=self._table, Key=erasing_key(project_id, user_id), ConsistentRead=True
        )

    def end_member_erasure(self, project_id: str, user_id: str) -> None:
        self._client.delete_item(TableName=self._table, Key=erasing_key(project_id, user_id))

    def erasures(self, project_id: str, limit: int) -> list[str]:
        """Up to ``limit`` of the users whose erasure in the project has begun and not
        ended."""
        return self._projects.users_under(project_id, ERASING_PREFIX, limit)

    def begin_project_erasure(self, project_id: str, caller_id: str) -> None:
        """Mark the project as being deleted while ``caller_id`` is still an owner
        (Forbidden otherwise): from then on it is gone to every reader and nobody joins."""
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": project_key(project_id),
                            "UpdateExpression": "SET #erasing = :true",
                            "ConditionExpression": "attribute_exists(#pk)",
                            "ExpressionAttributeNames": {
                                "#erasing": "erasing",
                                "#pk": "projectId",
                            },
                            "ExpressionAttributeValues": {":true": to_value(True)},
                        }
                    },
                    self._projects.caller_check(project_id, caller_id, frozenset({Role.OWNER})),
                ]
            )
        except ClientError as exc:
            raise project_change_refused(exc) from exc

    def for_members(self, project_id: str, limit: int) -> int:
        """Up to ``limit`` of the remaining member items of a project being deleted, and of
        its former members', give way to their erasure markers: the markers are written
        first, then the members go, so a failure between the two leaves someone both (the
        retry finishes) and never neither. How many did; fewer than ``limit``: all."""
        users = self._projects.users_under(project_id, MEMBER_PREFIX, limit)
        formers = (
            self._projects.users_under(project_id, FORMER_PREFIX, limit - len(users))
            if len(users) < limit
            else []
        )
        batch_write(
            self._client,
            self._table,
            [
                {"PutRequest": {"Item": erasing_key(project_id, user_id)}}
                for user_id in users + formers
            ],
            attempts=self._batch_attempts,
            base_seconds=self._batch_base_seconds,
        )
        batch_delete(
            self._client,
            self._table,
            [member_key(project_id, user_id) for user_id in users]
            + [former_key(project_id, user_id) for user_id in formers],
            attempts=self._batch_attempts,
            base_seconds=self._batch_base_seconds,
        )
        return len(users) + len(formers)

    def end_project_erasure(self, project_id: str) -> None:
        """Delete the project item, the last of a project being deleted."""
        self._client.delete_item(TableName=self._table, Key=project_key(project_id))
