"""Roles on a project and what each may do."""

from __future__ import annotations

from enum import StrEnum
from typing import NoReturn, overload

from recall.errors import Forbidden


class Role(StrEnum):
    OWNER = "owner"
    EDITOR = "editor"
    VIEWER = "viewer"


_RANK = {Role.VIEWER: 1, Role.EDITOR: 2, Role.OWNER: 3}

_WHAT = {
    Role.VIEWER: "read this project",
    Role.EDITOR: "change this project (its conversations, memory, presets and settings)",
    Role.OWNER: "do what only the project's owners do (members, budgets, deleting it)",
}


def roles_reaching(needed: Role) -> frozenset[Role]:
    """Every role that may do what ``needed`` may: what a write re-checks the caller's role
    against in its own transaction, so a role lost after the first check stops the write."""
    return frozenset(role for role, rank in _RANK.items() if rank >= _RANK[needed])


@overload
def require(role: None, needed: Role) -> NoReturn: ...


@overload
def require(role: Role | None, needed: Role) -> Role: ...


def require(role: Role | None, needed: Role) -> Role:
    """The caller's role if it reaches ``needed``; no role at all is Forbidden too, never empty."""
    if role is None:
        raise Forbidden("You have no role on this project.")
    if _RANK[role] < _RANK[needed]:
        raise Forbidden(f"Your role ({role}) cannot {_WHAT[needed]}; it needs {needed}.")
    return role
