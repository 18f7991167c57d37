"""Who may do what on a project: every project route starts here."""

from __future__ import annotations

from recall.domain.access import Role, require
from recall.store.projects import ProjectStore


class ProjectAccess:
    def __init__(self, projects: ProjectStore) -> None:
        self._projects = projects

    def require(self, user_id: str, project_id: str, needed: Role) -> Role:
        """The caller's role, or Forbidden when they have none or too low a one."""
        return require(self._projects.role_of(project_id, user_id), needed)
