"""What a background extraction writes.

Extraction proposes entries (``source=extracted``, with a confidence) from recent turns;
``decide_extraction`` turns them into one decision each: ADD a new entry, UPDATE a stored
one, or NONE with the reason. Three things the user did stop a candidate whatever it
says: the thread holds it as a thread entry (the user scoped it to this conversation, so it
never becomes project memory), an explicit entry contradicts it (the user said otherwise,
perhaps reversing the very message it was read from), or the user deleted its key (a
``DELETE`` or the forget tool) after the message it was said in (``deleted_since_said``).
Nor does a candidate change a stored entry said after it: a late job, or a thread read
after another, never puts the user's earlier word back over a later one.

What a duplicate, a contradiction or "said later" is: ``recall.domain.same_meaning``, the
definitions consolidation (``recall.domain.consolidation``) compares stored entries by too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from recall.domain.clock import parse
from recall.domain.memory import Action, Category, HistoryRecord, MemoryEntry, Source
from recall.domain.messages import Message
from recall.domain.same_meaning import (
    contradicts,
    duplicates,
    newest_first,
    opposed,
    same_subject,
    same_value,
    value_wording,
    when_said,
)


class ExtractionAction(StrEnum):
    ADD = "add"
    UPDATE = "update"
    NONE = "none"


class ExtractionDecision(BaseModel):
    """What happens to one candidate; ``existing`` is the stored entry it meets, if any."""

    model_config = ConfigDict(frozen=True)

    action: ExtractionAction
    candidate: MemoryEntry
    existing: MemoryEntry | None = None
    reason: str


def entry_to_write(decision: ExtractionDecision) -> MemoryEntry | None:
    """The entry a writer stores for a decision: the candidate for ADD; for UPDATE the
    stored entry's key, scope and thread with the candidate's words; nothing for NONE."""
    if decision.action == ExtractionAction.ADD:
        return decision.candidate
    if decision.action == ExtractionAction.UPDATE and decision.existing is not None:
        candidate = decision.candidate
        return decision.existing.model_copy(
            update={
                "value": candidate.value,
                "category": candidate.category,
                "source": Source.EXTRACTED,
                "confidence": candidate.confidence,
                "expires_at": candidate.expires_at,
                "said_at": candidate.said_at,
            }
        )
    return None


def spoken(messages: Sequence[Message]) -> int:
    """The user and assistant messages: what extraction's threshold counts. A tool message
    is the model's bookkeeping of a memory call, not conversation to learn from."""
    return sum(1 for message in messages if message.role in ("user", "assistant"))


def _says(heard: tuple[str, ...], said: tuple[str, ...]) -> bool:
    """Whether a wording holds another, in order, and not right after a "not" ("don't
    keep the header dark" does not say "keep the header dark")."""
    return any(
        heard[start : start + len(said)] == said and (start == 0 or heard[start - 1] != "not")
        for start in range(len(heard) - len(said) + 1)
    )


def stated_at(candidate: MemoryEntry, messages: Sequence[Message]) -> str:
    """When the user last said the candidate: the newest user message whose wording (as
    ``same_value`` reads it, negatives included) holds the value's. A candidate no
    message holds word for word (a model's paraphrase) is dated by the oldest message
    read, so that any deletion since then still wins."""
    said = value_wording(candidate.value)
    for message in reversed(messages):
        if message.role == "user" and _says(value_wording(message.content), said):
            return message.created_at
    return messages[0].created_at if messages else ""


def deleted_since_said(newest: HistoryRecord | None, said_at: str) -> str | None:
    """Why a candidate is not written when ``newest``, its key's latest change, is the user
    deleting it (a ``DELETE`` or the forget tool) at or after ``said_at``; None otherwise.
    A deletion by consolidation or by expiry stops nothing: the user did not ask for it."""
    if newest is None or newest.action != Action.DELETED or newest.source != Source.EXPLICIT:
        return None
    if said_at and parse(newest.at) < parse(said_at):
        return None
    return f"the user deleted {newest.key!r} after it was said: extraction does not bring it back"


def _decide(
    candidate: MemoryEntry,
    stored: Sequence[MemoryEntry],
    thread: Sequence[MemoryEntry],
) -> ExtractionDecision:
    """ADD, UPDATE or NONE for one candidate against the stored entries, before the limit."""
    for entry in thread:
        if entry.key == candidate.key or same_value(candidate, entry):
            return ExtractionDecision(
                action=ExtractionAction.NONE,
                candidate=candidate,
                existing=entry,
                reason=(
                    f"held by this conversation alone as {entry.key!r}: a rule the user "
                    "scoped to one conversation is not made project memory"
                ),
            )
    for entry in stored:
        if duplicates(candidate, entry):
            return ExtractionDecision(
                action=ExtractionAction.NONE,
                candidate=candidate,
                existing=entry,
                reason=f"duplicate: already stored as {entry.key!r}",
            )
    # An explicit entry on the candidate's own subject is met below, with its own reason.
    against = [
        entry
        for entry in stored
        if entry.source == Source.EXPLICIT
        and not same_subject(candidate, entry)
        and contradicts(candidate, entry)
    ]
    if against:
        return ExtractionDecision(
            action=ExtractionAction.NONE,
            candidate=candidate,
            existing=against[0],
            reason=(
                f"contradicts the explicit {against[0].key!r}: extraction never adds what the "
                "user's own entry says otherwise"
            ),
        )
    same = [entry for entry in stored if same_subject(candidate, entry)]
    if not same:
        return ExtractionDecision(
            action=ExtractionAction.ADD, candidate=candidate, reason="new subject"
        )
    explicit = [entry for entry in same if entry.source == Source.EXPLICIT]
    if explicit:
        return ExtractionDecision(
            action=ExtractionAction.NONE,
            candidate=candidate,
            existing=explicit[0],
            reason=(
                f"contradicts {explicit[0].key!r}, which is explicit: "
                "extraction never changes an explicit entry"
            ),
        )
    exact = [entry for entry in same if entry.key == candidate.key]
    existing = exact[0] if exact else newest_first(same)[0]
    if (
        existing.category == Category.FORBIDDEN
        and candidate.category != Category.FORBIDDEN
        and not opposed(candidate, existing)
    ):
        return ExtractionDecision(
            action=ExtractionAction.NONE,
            candidate=candidate,
            existing=existing,
            reason=(
                f"{existing.key!r} is forbidden: it changes only when a newer entry "
                "explicitly says the opposite"
            ),
        )
    if candidate.said_at and when_said(existing) > candidate.said_at:
        # A late job, or a thread read after another: the user's later word stands.
        return ExtractionDecision(
            action=ExtractionAction.NONE,
            candidate=candidate,
            existing=existing,
            reason=f"said before {existing.key!r}, which stands as the later word",
        )
    return ExtractionDecision(
        action=ExtractionAction.UPDATE,
        candidate=candidate,
        existing=existing,
        reason=f"restates {existing.key!r} with a different value",
    )


def _keys_of(decision: ExtractionDecision) -> set[str]:
    """The keys a decision speaks for: its candidate's, and the stored entry it meets."""
    keys = {decision.candidate.key}
    if decision.existing is not None:
        keys.add(decision.existing.key)
    return keys


def _never_withdrawn(candidate: MemoryEntry) -> str | None:
    return None


def decide_extraction(
    candidates: Sequence[MemoryEntry],
    stored: Sequence[MemoryEntry],
    *,
    min_confidence: float,
    max_new: int,
    thread: Sequence[MemoryEntry] = (),
    withdrawn: Callable[[MemoryEntry], str | None] = _never_withdrawn,
) -> list[ExtractionDecision]:
    """One decision per candidate, in the order a writer should apply them: highest
    confidence first (ties: the later candidate, from the more recent turns, first).

    ``stored`` is the scope's active entries, ``thread`` the thread's own. A candidate
    below ``min_confidence`` is NONE (never silently dropped: every candidate has a
    decision); one whose key or value a thread entry holds is NONE, meeting that entry;
    one that meets a higher-confidence candidate of the batch (same subject, same value,
    or the same stored entry) is NONE, so no key is written twice; a
    duplicate of a stored entry is NONE, and so is one that contradicts an explicit entry
    on another subject (the user's own word stands); one on the subject of a stored entry
    UPDATEs that entry, unless it is explicit (NONE); otherwise ADD. An ADD or UPDATE for which
    ``withdrawn`` gives a reason (the user deleted the candidate's key since) is NONE
    with it; it is asked only then, within the limit, and never for a key that is stored,
    so a caller that reads to answer reads at most ``max_new`` times plus once for each
    candidate it stops. At most ``max_new`` ADD and UPDATE decisions: the rest are NONE
    with the reason "limit"."""
    if any(candidate.source != Source.EXTRACTED for candidate in candidates):
        raise ValueError("extraction candidates carry source extracted")
    order = sorted(
        range(len(candidates)),
        key=lambda index: (-candidates[index].confidence, -index),
    )
    decisions: list[ExtractionDecision] = []
    seen: list[ExtractionDecision] = []
    writes = 0
    for index in order:
        candidate = candidates[index]
        if candidate.confidence < min_confidence:
            decisions.append(
                ExtractionDecision(
                    action=ExtractionAction.NONE,
                    candidate=candidate,
                    reason=(
                        f"confidence {candidate.confidence} is below the minimum {min_confidence}"
                    ),
                )
            )
            continue
        decision = _decide(candidate, stored, thread)
        keys = _keys_of(decision)
        better = next(
            (
                earlier
                for earlier in seen
                if same_subject(candidate, earlier.candidate)
                or duplicates(candidate, earlier.candidate)
                or keys & _keys_of(earlier)
            ),
            None,
        )
        seen.append(decision)
        if better is not None:
            decisions.append(
                ExtractionDecision(
                    action=ExtractionAction.NONE,
                    candidate=candidate,
                    existing=decision.existing,
                    reason=(
                        f"superseded in this batch by {better.candidate.key!r} "
                        f"(confidence {better.candidate.confidence})"
                    ),
                )
            )
            continue
        stored_key = decision.existing is not None and decision.existing.key == candidate.key
        if decision.action != ExtractionAction.NONE:
            why = None if writes >= max_new or stored_key else withdrawn(candidate)
            if writes >= max_new:
                decision = ExtractionDecision(
                    action=ExtractionAction.NONE,
                    candidate=candidate,
                    existing=decision.existing,
                    reason=f"limit: {max_new} new or changed entries per extraction",
                )
            elif why is not None:
                decision = ExtractionDecision(
                    action=ExtractionAction.NONE, candidate=candidate, reason=why
                )
            else:
                writes += 1
        decisions.append(decision)
    return decisions
