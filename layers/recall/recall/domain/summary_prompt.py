"""Asking a model for a thread's rolling summary instead of folding it offline: the
request that carries the previous summary and the messages that left the window, as many
of them as one request's budget holds (``summary_batch``), each cut to its bound."""

from __future__ import annotations

import re
from typing import Final

from recall.domain.messages import Message
from recall.domain.prompt import ModelRequest, PromptMessage
from recall.domain.summary import RollingSummary, uncovered
from recall.domain.transcript import clipped, oldest_that_fit

SUMMARY_INSTRUCTIONS: Final = (
    "You keep the rolling summary of a conversation whose earlier messages no longer fit "
    "the assistant's window. Update the previous summary with the new messages and answer "
    "with the updated summary only, as plain lines under these labels, leaving out a label "
    "with nothing under it:\n"
    "Facts:\n- one fact the user stated, per line\n"
    "Decisions:\n- one decision taken or confirmed, per line\n"
    "Open questions:\n- one question of the user that nothing later answers, per line\n"
    "Keep each point short and in the conversation's own words. Drop greetings, thanks and "
    "small talk. The whole summary must stay within {max_chars} characters; when it would "
    "not, drop the oldest points first."
)

_SPACES = re.compile(r"[\s\x00-\x1f\x7f\u2028\u2029]+")


def summary_batch(
    summary: RollingSummary | None,
    leaving: list[Message],
    *,
    fold_max_chars: int,
    message_max_chars: int,
) -> list[Message]:
    """The messages one request folds: the oldest uncovered ones whose transcript lines,
    each cut to ``message_max_chars``, fit in ``fold_max_chars`` (at least one). The fold
    then covers through the last of them, and the next request starts after it."""
    fresh = uncovered(summary, leaving)
    lines = [_line(message, message_max_chars) for message in fresh]
    return fresh[: oldest_that_fit(lines, fold_max_chars)]


def summary_prompt(
    summary: RollingSummary | None,
    leaving: list[Message],
    max_chars: int,
    *,
    message_max_chars: int,
    model_id: str,
    max_tokens: int,
    temperature: float,
) -> ModelRequest:
    """A request asking a model to fold the leaving messages into the summary.

    The conversation goes in as one quoted transcript, not as turns, so the model
    summarises it instead of answering it; each message cut to ``message_max_chars``.
    Check ``uncovered`` first: with nothing new there is nothing to ask. Pass a
    ``summary_batch``: the transcript holds every message it is given.
    """
    previous = summary.text if summary and summary.text else "(none yet)"
    transcript = "\n".join(
        _line(message, message_max_chars) for message in uncovered(summary, leaving)
    )
    body = (
        f"<previous_summary>\n{_quoted_lines(previous)}\n</previous_summary>\n"
        f"<new_messages>\n{transcript}\n</new_messages>"
    )
    return ModelRequest(
        model_id=model_id,
        system=[SUMMARY_INSTRUCTIONS.format(max_chars=max_chars)],
        messages=[PromptMessage(role="user", text=body)],
        max_tokens=max_tokens,
        temperature=temperature,
    )


def _line(message: Message, max_chars: int) -> str:
    return f"{message.role}: {_quoted(clipped(message.content, max_chars))}"


def _quoted(text: str) -> str:
    """Message text on one line that cannot close the transcript's tags."""
    return _SPACES.sub(" ", text).replace("<", "‹").replace(">", "›").strip()


def _quoted_lines(text: str) -> str:
    return "\n".join(_quoted(line) for line in text.splitlines() if line.strip())
