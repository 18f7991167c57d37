"""Projects and their members."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from recall.domain.access import Role
from recall.domain.memory import plain_text, shows_something
from recall.domain.numbers import NUMBER_RANGE, storable_number
from recall.domain.presets import ThreadSettings
from recall.domain.usage import Budget
from recall.errors import Invalid

ContextValue = str | int | float | bool

_ATTRIBUTE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")


class Project(BaseModel):
    project_id: str
    name: str
    context: dict[str, ContextValue] = Field(default_factory=dict)
    owner_count: int = 1
    created_by: str
    created_at: str
    updated_at: str
    # The settings every thread of the project follows unless its preset or itself sets them.
    settings: ThreadSettings = Field(default_factory=ThreadSettings)


class Member(BaseModel):
    project_id: str
    user_id: str
    role: Role
    added_at: str
    budget: Budget | None = None


def owner_delta(before: Role | None, after: Role | None) -> int:
    """How a role change moves the project's owner count."""
    return int(after is Role.OWNER) - int(before is Role.OWNER)


def checked_name(name: str, max_chars: int) -> str:
    cleaned = plain_text(name)
    if not shows_something(cleaned):
        raise Invalid(
            "A project needs a name.", [{"field": "name", "message": "must not be blank"}]
        )
    if len(cleaned) > max_chars:
        raise Invalid(
            f"A project name is at most {max_chars} characters.",
            [{"field": "name", "message": f"at most {max_chars} characters"}],
        )
    return cleaned


def checked_context(
    context: dict[str, Any], max_attributes: int, max_value_chars: int
) -> dict[str, ContextValue]:
    """Context attributes (type, currency, itemCount…) read into every prompt: a few short
    scalars, named like identifiers."""
    details = []
    if len(context) > max_attributes:
        details.append({"field": "context", "message": f"at most {max_attributes} attributes"})
    for name, value in context.items():
        if not _ATTRIBUTE.match(name):
            details.append(
                {"field": f"context.{name}", "message": "names are letters, digits and _ (1-40)"}
            )
        elif isinstance(value, str) and len(value) > max_value_chars:
            details.append(
                {"field": f"context.{name}", "message": f"at most {max_value_chars} characters"}
            )
        elif isinstance(value, int | float) and not storable_number(value):
            details.append({"field": f"context.{name}", "message": NUMBER_RANGE})
    if details:
        raise Invalid("The project context is not valid.", details)
    return dict(context)
