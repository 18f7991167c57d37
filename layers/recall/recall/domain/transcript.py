"""How much of a thread a background job shows a model. A summary or an extraction request
carries messages as one quoted transcript, and a thread can hold pasted pages and imported
replies of tens of thousands of characters: each message is cut to a bound, and only as
many lines as a budget holds go, so no request outgrows the model's context window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

CUT_MARK: Final = " […] "


def clipped(text: str, max_chars: int) -> str:
    """The text in at most ``max_chars``: its start and its end around ``CUT_MARK``, since
    a pasted page is usually framed by what its writer says about it."""
    if len(text) <= max_chars:
        return text
    room = max_chars - len(CUT_MARK)
    if room <= 0:
        return text[:max_chars]
    tail = room // 3
    return text[: room - tail] + CUT_MARK + (text[-tail:] if tail else "")


def oldest_that_fit(lines: Sequence[str], max_chars: int) -> int:
    """How many of the first lines fit in ``max_chars`` once joined by newlines; at least
    one when there is one, so a fold always moves on."""
    return _fitting(lines, max_chars)


def newest_that_fit(lines: Sequence[str], max_chars: int) -> int:
    """How many of the last lines fit in ``max_chars`` once joined by newlines; at least
    one when there is one."""
    return _fitting(list(reversed(lines)), max_chars)


def _fitting(lines: Sequence[str], max_chars: int) -> int:
    size = 0
    for count, line in enumerate(lines):
        size += len(line) + (1 if count else 0)
        if size > max_chars:
            return max(count, 1)
    return len(lines)
