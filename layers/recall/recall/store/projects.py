"""The Projects table: the project item (``sk = PROJECT``) and one item per member
(``sk = MEMBER#<userId>``, also indexed by ``memberId`` to list a user's projects).

Its keys are built here alone (their prefixes are ``store/keys.py``'s, which bounds a user
id by the longest); ``store/erasure_markers.py`` writes an erasure's markers
(``ERASING#<userId>``, ``erasing`` on the project item) with them. ``FORMER#<userId>`` is
a member an owner removed, whose data waits for their own erasure or the project's.
The project item's ``memberCount`` bounds how many members there are (``MEMBERS_MAX``): it
moves in the transaction that adds or removes one, so the bound holds under concurrent adds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import Field

from recall.domain.access import Role, roles_reaching
from recall.domain.ids import is_id
from recall.domain.presets import ThreadSettings
from recall.domain.projects import ContextValue, Member, Project
from recall.domain.usage import Budget
from recall.errors import Conflict, Forbidden, NotFound
from recall.settings import Settings
from recall.store.cursors import (
    decode_cursor,
    encode_cursor,
    not_this_cursor,
)
from recall.store.dynamodb import (
    Item,
    StoredItem,
    batch_get,
    cancellation_codes,
    dynamodb_client,
    error_code,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import ERASING_PREFIX, FORMER_PREFIX, MEMBER_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PROJECT_SK = "PROJECT"
BY_MEMBER = "byMember"
ROLE_LOST = "Your role on this project changed meanwhile; it no longer allows this."
STILL_ERASING = "This user's data in the project is still being erased; try again shortly."
_FAILED = "ConditionalCheckFailed"


def project_key(project_id: str) -> Item:
    return to_item({"projectId": project_id, "sk": PROJECT_SK})


def member_key(project_id: str, user_id: str) -> Item:
    return to_item({"projectId": project_id, "sk": MEMBER_PREFIX + user_id})


def erasing_key(project_id: str, user_id: str) -> Item:
    return to_item({"projectId": project_id, "sk": ERASING_PREFIX + user_id})


def former_key(project_id: str, user_id: str) -> Item:
    """A member removed by an owner: their data stays (it is theirs, and comes back if they
    are added again) until they erase it or the project is deleted, which both find them
    here."""
    return to_item({"projectId": project_id, "sk": FORMER_PREFIX + user_id})


def _role_in(roles: frozenset[Role]) -> tuple[str, dict[str, Any]]:
    """``#role IN (…)`` over ``roles``, and its values."""
    values = {f":role{n}": to_value(role.value) for n, role in enumerate(sorted(roles))}
    return f"#role IN ({', '.join(values)})", values


def project_change_refused(exc: ClientError) -> Exception:
    """Why a change to the project item, checked against its caller's role as the
    transaction's second action, was cancelled."""
    if failed_at(exc, 1):
        return Forbidden(ROLE_LOST)
    if failed_at(exc, 0):
        return NotFound("No such project.")
    return translate(exc, "The project changed meanwhile; try again.")


def failed_at(exc: ClientError, index: int) -> bool:
    """Whether the transaction was cancelled because item ``index``'s condition failed:
    the reasons are read by position, one per item in the order they were sent."""
    if error_code(exc) != "TransactionCanceledException":
        return False
    codes = cancellation_codes(exc)
    return len(codes) > index and codes[index] == _FAILED


class ProjectItem(StoredItem):
    project_id: str
    sk: str = PROJECT_SK
    name: str
    context: dict[str, ContextValue] = Field(default_factory=dict)
    owner_count: int = 1
    # How many member items the project has; ``None`` on a project made before it was
    # kept, until its first member change counts them (``members_counted``).
    member_count: int | None = None
    # How many presets the project has (store/presets.py moves it with each create, delete).
    preset_count: int = 0
    settings: ThreadSettings = Field(default_factory=ThreadSettings)
    erasing: bool | None = None
    created_by: str
    created_at: str
    updated_at: str

    def project(self) -> Project:
        return Project.model_validate(self.model_dump(include=set(Project.model_fields)))


class MemberItem(StoredItem):
    """A member's item; ``byMember`` projects only its keys and ``role``."""

    project_id: str
    sk: str
    user_id: str = Field(alias="memberId")
    role: Role
    added_at: str = ""
    budget: Budget | None = None

    @classmethod
    def of(cls, member: Member) -> MemberItem:
        return cls.model_validate({**member.model_dump(), "sk": MEMBER_PREFIX + member.user_id})

    def member(self) -> Member:
        return Member.model_validate(self.model_dump(include=set(Member.model_fields)))


class ProjectStore:
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

    def _stored(self, project_id: str) -> ProjectItem | None:
        item = self.client.get_item(
            TableName=self._table, Key=project_key(project_id), ConsistentRead=True
        ).get("Item")
        return ProjectItem.model_validate(from_item(item)) if item else None

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
            role_in, role_values = _role_in(frozenset({Role.OWNER}))
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

    @property
    def table(self) -> str:
        return self._table

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
            role_in, role_values = _role_in(caller_roles)
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

    def project_erasing(self, project_id: str) -> bool:
        stored = self._stored(project_id)
        return stored is not None and bool(stored.erasing)

    def caller_check(self, project_id: str, caller_id: str, roles: frozenset[Role]) -> Any:
        """A transaction item that holds only while ``caller_id``'s role is one of ``roles``."""
        return {"ConditionCheck": self._role_condition(project_id, caller_id, roles)}

    def _role_condition(
        self, project_id: str, user_id: str, roles: frozenset[Role]
    ) -> dict[str, Any]:
        condition, values = _role_in(roles)
        return {
            "TableName": self._table,
            "Key": member_key(project_id, user_id),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#role": "role"},
            "ExpressionAttributeValues": values,
        }


def _project_cursor(cursor: str) -> str:
    """The project a list cursor resumes after: anything but a project id (a cursor of
    another list, or edited) is a 422, never a start key DynamoDB refuses."""
    start = decode_cursor(cursor, {"projectId"})["projectId"]
    if not is_id(start):
        raise not_this_cursor("not a position in your projects")
    return start
