"""Timestamps as ISO-8601 UTC strings with milliseconds, which sort as text."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    """Always a four-digit year: ``strftime("%Y")`` writes year 999 as ``999``, which
    neither sorts with the rest nor parses back."""
    utc = moment.astimezone(UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
