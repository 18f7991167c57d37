"""The one place where errors become status codes and the API's error body
``{"error": {"code", "message", "details"?}}``, over HTTP and in a WebSocket ``error``
frame alike. It imports no web framework: the WebSocket functions answer with it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recall.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    ModelFailed,
    NotFound,
    Throttled,
    TooLarge,
    Unauthenticated,
    Unavailable,
)
from recall.observability import logger
from recall.settings import get_settings
from recall.store.dynamodb import fault_of

STATUS: dict[type[DomainError], int] = {
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Invalid: 422,
    Throttled: 429,
    Unavailable: 503,
}

# Statuses that say "the same request may succeed later", so they carry Retry-After.
RETRY_LATER = {429, 503}


@dataclass(frozen=True)
class ErrorAnswer:
    """An error as the client gets it: the status, the body and, when it says when to try
    again, ``Retry-After`` seconds."""

    status: int
    body: dict[str, Any]
    retry_after: int | None = None

    @property
    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else None


def error_answer(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    retry_after: int | None = None,
) -> ErrorAnswer:
    """The error body; a 429 or 503 (and any error with ``retry_after`` seconds) says when
    to try again, so a client backs off instead of hammering a busy dependency."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    if retry_after is None and status in RETRY_LATER:
        retry_after = get_settings().retry_after_seconds
    return ErrorAnswer(status, {"error": error}, retry_after)


def status_of(error: DomainError) -> int:
    if isinstance(error, ModelFailed):
        return error.status
    for kind in type(error).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return 400


def domain_error_answer(error: DomainError) -> ErrorAnswer:
    """The answer to a domain error."""
    return error_answer(
        status_of(error), error.code, error.message, error.details, retry_after=error.retry_after
    )


def unexpected_error_answer(error: Exception) -> ErrorAnswer:
    """The answer to any other error: a dependency that kept failing is a 429 or 503."""
    fault = fault_of(error)
    if fault is not None:
        # A dependency still throttled or failing after botocore's retries: the
        # request may be sent again, so it is a 429 or 503, never a 500.
        logger.warning(
            "dependency failed after its retries",
            extra={"error_type": type(error).__name__, "status_code": status_of(fault)},
        )
        return domain_error_answer(fault)
    logger.exception("unexpected error")
    return error_answer(500, "internal_error", "Something went wrong on our side.")


# Where a request's value came from, which pydantic puts first in an error's location.
_SOURCES = frozenset({"body", "query", "path", "header"})
# The labels pydantic gives a union's branches in a location: not fields a client sent.
_BRANCHES = frozenset({"str", "int", "float", "bool", "none"})


def field_name(location: tuple[Any, ...]) -> str:
    """The field as a client names it: ``limit``, not ``query.limit``; ``context.a``, not
    ``context.a.str``; ``threads.0.role``, not the tagged union's ``threads.threads.0.role``
    or ``recall.export.conversations`` (a tag is a ``format`` value; no field has a dot)."""
    parts = list(location)
    if parts and parts[0] in _SOURCES:
        parts = parts[1:]
    if len(parts) > 1 and isinstance(parts[0], str) and (parts[0] == parts[1] or "." in parts[0]):
        parts = parts[1:]
    kept = [
        str(part)
        for part in parts
        if not (isinstance(part, str) and (part in _BRANCHES or "[" in part))
    ]
    return ".".join(kept) or "body"


def field_details(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each error once per field: a value that fits no branch of a union is one error."""
    details: dict[str, dict[str, Any]] = {}
    for error in errors:
        field = field_name(tuple(error.get("loc", ())))
        details.setdefault(
            field,
            {
                "field": field,
                "message": str(error.get("msg", "")),
                "type": str(error.get("type", "")),
            },
        )
    return list(details.values())
