"""Creating projects and managing who is on them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from recall.domain import clock
from recall.domain.access import Role, roles_reaching
from recall.domain.ids import new_id
from recall.domain.presets import ThreadSettings, checked_settings
from recall.domain.projects import Member, Project, checked_context, checked_name, owner_delta
from recall.errors import Conflict, Forbidden, Invalid, NotFound
from recall.observability import logger
from recall.retry import attempts
from recall.services.access import ProjectAccess
from recall.services.presets import setting_limits
from recall.settings import Settings
from recall.store.keys import USER_ID_MAX_BYTES, fits_user_id
from recall.store.project_items import ROLE_LOST
from recall.store.projects import ProjectStore

MANAGERS = roles_reaching(Role.OWNER)
"""Who may manage members: re-checked by each member change's own transaction."""
EDITORS = roles_reaching(Role.EDITOR)
"""Who may change the project itself: re-checked by the update's own transaction."""


class ProjectService:
    def __init__(self, settings: Settings, access: ProjectAccess, projects: ProjectStore) -> None:
        self._settings = settings
        self._access = access
        self._projects = projects

    def _checked_context(self, context: dict[str, Any]) -> dict[str, Any]:
        return checked_context(
            context,
            self._settings.project_context_max_attributes,
            self._settings.project_context_value_max_chars,
        )

    def create(self, user_id: str, name: str, context: dict[str, Any]) -> Project:
        at = clock.stamp(clock.now())
        project = Project(
            project_id=new_id(),
            name=checked_name(name, self._settings.project_name_max_chars),
            context=self._checked_context(context),
            created_by=user_id,
            created_at=at,
            updated_at=at,
        )
        owner = Member(project_id=project.project_id, user_id=user_id, role=Role.OWNER, added_at=at)
        self._projects.create(project, owner)
        logger.info("project created", extra={"project_id": project.project_id})
        return project

    def list_projects(
        self, user_id: str, limit: int, cursor: str | None
    ) -> tuple[list[tuple[Project, Role]], str | None]:
        return self._projects.projects_of(user_id, limit, cursor)

    def get(self, user_id: str, project_id: str) -> tuple[Project, Role]:
        role = self._access.require(user_id, project_id, Role.VIEWER)
        project = self._projects.get(project_id)
        if project is None:
            raise NotFound("No such project.")
        return project, role

    def update(
        self,
        user_id: str,
        project_id: str,
        name: str | None,
        context: dict[str, Any] | None,
        settings: ThreadSettings | None = None,
    ) -> tuple[Project, Role]:
        """``settings`` replaces the project's defaults, which its threads follow."""
        role = self._access.require(user_id, project_id, Role.EDITOR)
        project = self._projects.update(
            project_id,
            checked_name(name, self._settings.project_name_max_chars) if name is not None else None,
            self._checked_context(context) if context is not None else None,
            clock.stamp(clock.now()),
            settings=checked_settings(settings, setting_limits(self._settings), "settings")
            if settings is not None
            else None,
            caller_id=user_id,
            caller_roles=EDITORS,
        )
        return project, role

    def members(self, user_id: str, project_id: str) -> list[Member]:
        self._access.require(user_id, project_id, Role.VIEWER)
        return self._projects.members(project_id)

    def set_member(
        self, user_id: str, project_id: str, member_id: str, role: Role
    ) -> tuple[Member, bool]:
        """Add or change a member; ``True`` when they were added. The caller's role is read
        first and checked again by the write itself, so an owner demoted or removed meanwhile
        changes nothing."""
        self._access.require(user_id, project_id, Role.OWNER)
        if not fits_user_id(member_id):
            raise Invalid(
                f"A user id is 1 to {USER_ID_MAX_BYTES} bytes without '#', not all blank.",
                [
                    {
                        "field": "userId",
                        "message": f"1 to {USER_ID_MAX_BYTES} bytes, no '#', not blank",
                    }
                ],
            )
        for attempt in self._member_attempts():
            held = self._projects.member_of(project_id, member_id)
            before = held.role if held is not None else None
            if held is not None and before is role:
                return held, False
            # A role change keeps when they were added and their budget; the answer says so.
            member = (
                held.model_copy(update={"role": role})
                if held is not None
                else Member(
                    project_id=project_id,
                    user_id=member_id,
                    role=role,
                    added_at=clock.stamp(clock.now()),
                )
            )
            self._still_owner_if_self(user_id, member_id, before)
            self._guard_last_owner(project_id, owner_delta(before, role))
            if held is None:
                self._guard_members_max(project_id)
            try:
                self._projects.change_member(
                    member,
                    before,
                    role,
                    owner_delta(before, role),
                    caller_id=user_id,
                    caller_roles=MANAGERS,
                )
            except Conflict:
                if attempt == self._settings.member_change_attempts - 1:
                    raise
                continue
            logger.info(
                "member set", extra={"project_id": project_id, "role": role.value, "was": before}
            )
            return member, before is None
        raise Conflict("The project's members changed meanwhile.")

    def remove_member(self, user_id: str, project_id: str, member_id: str) -> None:
        """Remove a member, only while the caller is still an owner (checked by the write)."""
        self._access.require(user_id, project_id, Role.OWNER)
        if not fits_user_id(member_id):
            raise NotFound("That user is not a member of this project.")
        for attempt in self._member_attempts():
            before = self._projects.role_of(project_id, member_id)
            if before is None:
                raise NotFound("That user is not a member of this project.")
            self._still_owner_if_self(user_id, member_id, before)
            self._guard_last_owner(project_id, owner_delta(before, None))
            # The removal moves the member count, which must be kept from here on.
            self._projects.members_counted(project_id)
            member = Member(project_id=project_id, user_id=member_id, role=before, added_at="")
            try:
                self._projects.change_member(
                    member,
                    before,
                    None,
                    owner_delta(before, None),
                    caller_id=user_id,
                    caller_roles=MANAGERS,
                )
            except Conflict:
                if attempt == self._settings.member_change_attempts - 1:
                    raise
                continue
            logger.info("member removed", extra={"project_id": project_id, "was": before})
            return

    def _member_attempts(self) -> Iterator[int]:
        """A member change's attempts: it is read and sent again when another change to the
        project's members got there first."""
        settings = self._settings
        return attempts(settings.member_change_attempts, settings.batch_retry_base_seconds)

    @staticmethod
    def _still_owner_if_self(user_id: str, member_id: str, before: Role | None) -> None:
        """An owner changing themselves: the role just read is their own, again after a
        retry, so one demoted or removed meanwhile stops here (the write checks it too)."""
        if member_id == user_id and before not in MANAGERS:
            raise Forbidden(ROLE_LOST)

    def _guard_members_max(self, project_id: str) -> None:
        """A full project refuses a new member in words; the add's own transaction holds
        the count below MEMBERS_MAX, so one racing past this read is refused there."""
        limit = self._settings.members_max
        if self._projects.members_counted(project_id) >= limit:
            raise Conflict(
                f"A project has at most {limit:,} members; remove one before adding another."
            )

    def _guard_last_owner(self, project_id: str, delta: int) -> None:
        if delta >= 0:
            return
        project = self._projects.get(project_id)
        if project is None:
            raise NotFound("No such project.")
        if project.owner_count + delta < 1:
            raise Conflict("A project must keep at least one owner; make someone else owner first.")
