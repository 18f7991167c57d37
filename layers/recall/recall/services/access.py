"""Who may do what on a project: every project route starts here."""

from __future__ import annotations

from typing import Any

from recall.domain.access import Role, require
from recall.domain.projects import Member
from recall.store.projects import ProjectStore


class ProjectAccess:
    def __init__(self, projects: ProjectStore) -> None:
        self._projects = projects

    def require(self, user_id: str, project_id: str, needed: Role) -> Role:
        """The caller's role, or Forbidden when they have none or too low a one."""
        return require(self._projects.role_of(project_id, user_id), needed)

    def member(self, user_id: str, project_id: str, needed: Role) -> Member:
        """The caller's member item (their role and budget), refused as ``require`` is."""
        found = self._projects.member_of(project_id, user_id)
        if found is None:
            require(None, needed)
        require(found.role, needed)
        return found

    def still(self, user_id: str, project_id: str, needed: Role) -> dict[str, Any]:
        """The check, for a write's own transaction, that the caller still holds the role
        ``require`` read a moment before."""
        return self._projects.role_check(project_id, user_id, needed)
