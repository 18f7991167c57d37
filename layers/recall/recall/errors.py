"""Domain errors. The API maps each to one status code, in one place (``recall.api.errors``)."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code = "error"

    def __init__(
        self,
        message: str,
        details: list[dict[str, Any]] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.retry_after = retry_after  # seconds, sent as ``Retry-After``


class Unauthenticated(DomainError):
    code = "unauthenticated"


class Forbidden(DomainError):
    code = "forbidden"


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class TooLarge(DomainError):
    code = "payload_too_large"


class Invalid(DomainError):
    code = "validation_error"


class Throttled(DomainError):
    code = "throttled"


class BudgetExceeded(Throttled):
    """A turn past the caller's budget, refused before the model; ``retry_after`` is when
    the period resets."""

    code = "budget_exceeded"


class Unavailable(DomainError):
    """A dependency failed transiently and its retries ran out; nothing was saved, so the
    same request may be sent again."""

    code = "unavailable"


class InProgress(Conflict):
    """The same request (its ``Idempotency-Key``) is still running: retry it later for
    its answer."""


class ModelFailed(DomainError):
    """The model failed during a turn, after the turn saved what it could: the user's
    message and an assistant message with status ``error``. ``status`` is 502, 503 or 504."""

    def __init__(
        self, message: str, status: int, code: str, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message, details)
        self.status = status
        self.code = code
