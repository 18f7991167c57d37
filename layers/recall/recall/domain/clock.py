"""Timestamps as ISO-8601 UTC strings with milliseconds, which sort as text."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
