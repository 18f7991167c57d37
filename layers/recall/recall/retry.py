"""The one retry policy: a bounded number of attempts with full-jitter backoff between
them. A loop that tries a write again after another writer got there first (a
``Conflict``, a transaction that collided) or after DynamoDB left part of a batch
unprocessed reads ``for attempt in attempts(count, base_seconds): ...``: the body tries,
``continue`` tries again after a pause, ``return`` or ``raise`` leaves. What running out
means is the caller's: the code after its loop raises its own error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import random
import time

BACKOFF_CEILING_SECONDS = 1.0


def backoff_seconds(attempt: int, base_seconds: float) -> float:
    """Full jitter: anywhere from nothing up to ``base_seconds * 2**attempt`` (at most
    ``BACKOFF_CEILING_SECONDS``), so writers that met each other spread out instead of
    meeting again in step. A spread, not a secret: the standard generator is the right
    one."""
    ceiling = min(BACKOFF_CEILING_SECONDS, base_seconds * 2**attempt)
    return random.uniform(0, ceiling)  # noqa: S311


def attempts(
    count: int, base_seconds: float, *, sleep: Callable[[float], None] | None = None
) -> Iterator[int]:
    """The attempt numbers ``0`` to ``count - 1``. Before each attempt after the first it
    pauses for ``backoff_seconds(attempt - 1, base_seconds)``; never before the first, and
    never after the last (the loop has ended: nobody waits for nothing). ``sleep`` is
    ``time.sleep`` as it is when the pause comes, so a test that replaces it is obeyed."""
    for attempt in range(count):
        if attempt:
            (sleep or time.sleep)(backoff_seconds(attempt - 1, base_seconds))
        yield attempt
