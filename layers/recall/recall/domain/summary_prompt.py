"""Asking a model for a thread's rolling summary instead of folding it offline: the
request that carries the previous summary and the messages that left the window."""

from __future__ import annotations

import re
from typing import Final

from recall.domain.messages import Message
from recall.domain.prompt import ModelRequest, PromptMessage
from recall.domain.summary import RollingSummary, uncovered

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


def summary_prompt(
    summary: RollingSummary | None,
    leaving: list[Message],
    max_chars: int,
    *,
    model_id: str,
    max_tokens: int,
    temperature: float,
) -> ModelRequest:
    """A request asking a model to fold the leaving messages into the summary.

    The conversation goes in as one quoted transcript, not as turns, so the model
    summarises it instead of answering it. Check ``uncovered`` first: with nothing new
    there is nothing to ask.
    """
    previous = summary.text if summary and summary.text else "(none yet)"
    transcript = "\n".join(
        f"{message.role}: {_quoted(message.content)}" for message in uncovered(summary, leaving)
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


def _quoted(text: str) -> str:
    """Message text on one line that cannot close the transcript's tags."""
    return _SPACES.sub(" ", text).replace("<", "‹").replace(">", "›").strip()


def _quoted_lines(text: str) -> str:
    return "\n".join(_quoted(line) for line in text.splitlines() if line.strip())
