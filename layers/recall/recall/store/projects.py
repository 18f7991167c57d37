"""The Projects table: the project item (``sk = PROJECT``) and one item per member
(``sk = MEMBER#<userId>``, also indexed by ``memberId`` to list a user's projects).

Its keys and items are ``store/project_items.py``'s; ``store/erasure_markers.py`` writes an
erasure's markers (``ERASING#<userId>``, ``erasing`` on the project item) with them.
``FORMER#<userId>`` is a member an owner removed, whose data waits for their own erasure or
the project's. ``ProjectStore`` extends ``ProjectMembers`` (``store/project_members.py``:
member changes, budgets, the project's items by prefix) with the project itself: creating
it, reading it with the caller's role, changing it, and listing a user's projects."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from recall.domain.access import Role, roles_reaching
from recall.domain.ids import is_id
from recall.domain.presets import ThreadSettings
from recall.domain.projects import Member, Project
from recall.domain.usage import Budget
from recall.errors import NotFound
from recall.store.cursors import (
    decode_cursor,
    encode_cursor,
    not_this_cursor,
)
from recall.store.dynamodb import (
    Item,
    batch_get,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.project_items import (
    BY_MEMBER,
    PROJECT_SK,
    MemberItem,
    ProjectItem,
    member_key,
    project_change_refused,
    project_key,
)
from recall.store.project_members import ProjectMembers


class ProjectStore(ProjectMembers):
    def create(self, project: Project, owner: Member) -> None:
        """The project, with ``owner`` as its one owner, and the owner's member item."""
        project_item = ProjectItem.model_validate(
            {**project.model_dump(), "owner_count": 1, "member_count": 1}
        )
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": project_item.item(),
                            "ConditionExpression": "attribute_not_exists(#pk)",
                            "ExpressionAttributeNames": {"#pk": "projectId"},
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": MemberItem.of(owner).item()}},
                ]
            )
        except ClientError as exc:
            raise translate(exc, "A project with this id already exists.") from exc

    def get(self, project_id: str) -> Project | None:
        """The project; ``None`` once it is being deleted."""
        stored = self._stored(project_id)
        return stored.project() if stored is not None and not stored.erasing else None

    def role_of(self, project_id: str, user_id: str) -> Role | None:
        member = self.member_of(project_id, user_id)
        return member.role if member else None

    def member_of(self, project_id: str, user_id: str) -> Member | None:
        item = self.client.get_item(
            TableName=self._table, Key=member_key(project_id, user_id), ConsistentRead=True
        ).get("Item")
        return MemberItem.model_validate(from_item(item)).member() if item else None

    def project_and_role_keys(self, project_id: str, user_id: str) -> list[Item]:
        """Keys for a caller's batched read of a project and their own role on it."""
        return [project_key(project_id), member_key(project_id, user_id)]

    def role_check(self, project_id: str, user_id: str, needed: Role) -> dict[str, Any]:
        """A ``ConditionCheck`` that the caller still holds ``needed`` or more when the
        transaction it joins lands: a role read earlier may be gone by then."""
        return self._role_condition(project_id, user_id, roles_reaching(needed))

    def read_project_and_role(
        self, items: list[Item]
    ) -> tuple[Project | None, Role | None, Budget | None]:
        """The project, and the caller's role and budget, from their batched read."""
        project: Project | None = None
        role: Role | None = None
        budget: Budget | None = None
        for item in items:
            values = from_item(item)
            if values["sk"] == PROJECT_SK:
                project = ProjectItem.model_validate(values).project()
            else:
                member = MemberItem.model_validate(values)
                role, budget = member.role, member.budget
        return project, role, budget

    def update(
        self,
        project_id: str,
        name: str | None,
        context: dict[str, Any] | None,
        updated_at: str,
        *,
        settings: ThreadSettings | None = None,
        caller_id: str,
        caller_roles: frozenset[Role],
    ) -> Project:
        """Rename, re-context or set the default settings of the project while
        ``caller_id`` still has one of ``caller_roles``: their member item is checked in the
        same transaction, so a caller removed or demoted since their role was read is
        refused (Forbidden)."""
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
        if settings is not None:
            sets.append("#settings = :settings")
            names["#settings"] = "settings"
            values[":settings"] = to_value(settings.model_dump(by_alias=True, exclude_none=True))
        change: Any = {
            "Update": {
                "TableName": self._table,
                "Key": project_key(project_id),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": "attribute_exists(#pk)",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        try:
            self.client.transact_write_items(
                TransactItems=[change, self.caller_check(project_id, caller_id, caller_roles)]
            )
        except ClientError as exc:
            raise project_change_refused(exc) from exc
        project = self.get(project_id)
        if project is None:
            raise NotFound("No such project.")
        return project

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
            start = _project_cursor(cursor)
            query["ExclusiveStartKey"] = {
                **member_key(start, user_id),
                **to_item({"memberId": user_id}),
            }
        page = self.client.query(**query)
        memberships = [MemberItem.model_validate(from_item(item)) for item in page["Items"]]
        roles = {membership.project_id: membership.role for membership in memberships}
        projects = self._projects(list(roles))
        rows = [(projects[pid], roles[pid]) for pid in roles if pid in projects]
        last = page.get("LastEvaluatedKey")
        next_cursor = encode_cursor({"projectId": from_item(last)["projectId"]}) if last else None
        return rows, next_cursor

    def _projects(self, project_ids: list[str]) -> dict[str, Project]:
        """The projects that exist of ``project_ids``, by id: one bounded batch read."""
        found = batch_get(
            self.client,
            {self._table: {"Keys": [project_key(pid) for pid in project_ids]}},
            self._batch_attempts,
            self._batch_base_seconds,
        )
        stored = [ProjectItem.model_validate(from_item(item)) for item in found[self._table]]
        projects = [item.project() for item in stored if not item.erasing]
        return {project.project_id: project for project in projects}

    def project_erasing(self, project_id: str) -> bool:
        stored = self._stored(project_id)
        return stored is not None and bool(stored.erasing)


def _project_cursor(cursor: str) -> str:
    """The project a list cursor resumes after: anything but a project id (a cursor of
    another list, or edited) is a 422, never a start key DynamoDB refuses."""
    start = decode_cursor(cursor, {"projectId"})["projectId"]
    if not is_id(start):
        raise not_this_cursor("not a position in your projects")
    return start
