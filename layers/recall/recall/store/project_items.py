"""The Projects table's keys and items: the project item (``sk = PROJECT``), one item per
member (``sk = MEMBER#<userId>``, also indexed by ``memberId`` to list a user's projects),
an erasure's marker (``ERASING#<userId>``) and a removed member's (``FORMER#<userId>``);
and how a transaction over them that was refused reads. The prefixes are
``store/keys.py``'s, which bounds a user id by the longest."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from pydantic import Field

from recall.domain.access import Role
from recall.domain.projects import Member, Project
from recall.errors import Forbidden, NotFound
from recall.store.dynamodb import (
    Item,
    StoredItem,
    cancellation_codes,
    error_code,
    to_item,
    to_value,
    translate,
)
from recall.store.keys import ERASING_PREFIX, FORMER_PREFIX, MEMBER_PREFIX

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


def role_among(roles: frozenset[Role]) -> tuple[str, dict[str, Any]]:
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


class ProjectItem(StoredItem, Project):
    """The project as stored: the project, under its key, with what only the store keeps
    (how many members and presets it has, and the mark of an erasure under way)."""

    sk: str = PROJECT_SK
    # How many member items the project has; ``None`` on a project made before it was
    # kept, until its first member change counts them (``members_counted``).
    member_count: int | None = None
    # How many presets the project has (store/presets.py moves it with each create, delete).
    preset_count: int = 0
    erasing: bool | None = None

    def project(self) -> Project:
        return Project.model_validate(self.model_dump(include=set(Project.model_fields)))


class MemberItem(StoredItem, Member):
    """A member as stored; ``byMember`` projects only its keys and ``role``, so an item read
    there has no ``addedAt``."""

    sk: str
    user_id: str = Field(alias="memberId")
    added_at: str = ""

    @classmethod
    def of(cls, member: Member) -> MemberItem:
        return cls.model_validate({**member.model_dump(), "sk": MEMBER_PREFIX + member.user_id})

    def member(self) -> Member:
        return Member.model_validate(self.model_dump(include=set(Member.model_fields)))
