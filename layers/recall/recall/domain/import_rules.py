"""The rules every part of an imported document is checked by, and the ids an import
derives: the bounds it is held to (``ImportLimits``), errors collected with where they are
in the document, times checked like the API's own, and ULIDs whose random part comes from
what they name, so the same document always makes the same items."""

from __future__ import annotations

from datetime import UTC, datetime
import hashlib
from typing import Any

from pydantic import BaseModel

from recall.domain.clock import parse, stamp
from recall.domain.ids import encode
from recall.domain.presets import PresetLimits, SettingLimits
from recall.errors import Invalid


class ImportLimits(BaseModel):
    """The bounds an import is held to (values from ``Settings``)."""

    threads_max: int
    messages_per_thread_max: int
    message_max_chars: int
    message_max_bytes: int
    title_max_chars: int
    memory_value_max_chars: int
    memory_expiry_max_days: int
    chunk_max_bytes: int
    presets_max: int
    preset: PresetLimits
    settings: SettingLimits


def digest(*parts: str) -> int:
    joined = "\x1f".join(parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(joined).digest()[:16], "big")


def derived_id(at_ms: int, *seed: str) -> str:
    """A ULID whose time is ``at_ms`` and whose random part comes from ``seed``."""
    return encode(max(at_ms, 0), 10) + encode(digest(*seed) >> 48, 16)


def ms_of(text: str) -> int:
    return int(parse(text).timestamp() * 1000)


class Problems:
    """Collects errors with where they are, up to a bound, then raises them at once."""

    def __init__(self) -> None:
        self.details: list[dict[str, Any]] = []

    def add(self, field: str, message: str) -> None:
        if len(self.details) < 20:
            self.details.append({"field": field, "message": message})

    def raise_any(self) -> None:
        if self.details:
            first = self.details[0]
            raise Invalid(
                f"The import document is not valid: {first['field']}: {first['message']}.",
                self.details,
            )


# The earliest time an import takes: ids carry their time since 1970 (ULIDs), so an older
# thread could not keep its order, and a chat history from before it is a mistake.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)


def moment_of(text: str, field: str, problems: Problems) -> datetime | None:
    """``text`` as a time with a time zone, or None with the problem noted."""
    try:
        moment = parse(text)
    except ValueError:
        problems.add(field, "an ISO 8601 date and time")
        return None
    if moment.tzinfo is None:
        problems.add(field, "an ISO 8601 date and time with a time zone")
        return None
    return moment


def stamp_of(text: str, field: str, now: datetime, problems: Problems) -> str | None:
    """``text`` as the API's timestamp format: a time zone is required, the future is
    refused (an imported thread cannot sort after the turns still to come) and so is a
    time before 1970 (``EARLIEST``)."""
    moment = moment_of(text, field, problems)
    if moment is None:
        return None
    if moment > now:
        problems.add(field, "not in the future")
        return None
    if moment < EARLIEST:
        problems.add(field, "not before 1970-01-01T00:00:00Z")
        return None
    return stamp(moment)


def found(problems: Problems, where: str, exc: Invalid) -> None:
    """A check's errors, each field put under ``where`` in the document."""
    for detail in exc.details or [{"field": "", "message": exc.message}]:
        field = str(detail.get("field", ""))
        problems.add(".".join(part for part in (where, field) if part), str(detail["message"]))
