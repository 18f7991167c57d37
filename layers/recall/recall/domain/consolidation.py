"""Consolidation: one plan that tidies a project's persistent memory, as deletions only.

``plan_consolidation`` reads all stored entries of one user and project and returns the
entries to delete, each with the step and the reason, for a store to apply one by one and
record in history. It never writes a value: every entry that survives is an input entry
word for word, so nobody's memory says something they did not say. Expired entries
(``is_active`` false) and thread entries are not considered at all.

"Same subject", "same value", "duplicate", polarity and "opposed" are defined once, in
``recall.domain.same_meaning``, and mean the same here. The steps, in order:

1. MERGE duplicates: of each set of duplicates ONE entry stays as it is, the others are
   deleted into it, each only into one ranked before it. The one that stays is explicit
   before any other source (the user's own words are kept word for word), then forbidden
   before any other category (a rule against something is not merged away into a softer
   entry of the same source), then the newest, then the first key. A forbidden entry is
   never deleted as a duplicate, not even of another forbidden entry: a rule saved twice
   stays twice, since a forbidden entry goes only on an explicit contradiction (step 2).
   So the user's explicit preference and an extracted forbidden copy of it both stay,
   each as it is: the user's category is not changed for them, and the rule keeps its
   force.
2. RESOLVE contradictions in favour of the entry said later (``when_said``: an extracted
   entry's message time, not when extraction wrote it). Two entries contradict when they
   have the same subject and different values, or when they are opposed (do vs don't)
   and the subject words of one value contain the other's: "never use stock photos" and
   "use stock photos for the blog". A background entry (extracted, consolidated) never
   overrides an explicit one: against an explicit entry it loses whatever its age. A
   forbidden entry is deleted only when an entry said strictly later opposes it; a newer
   forbidden entry, or a neutral one, leaves it standing, and both stay.
3. PRUNE vague entries the background wrote (extracted, consolidated): a value under
   ``min_value_chars`` characters, a value that is a content-free word
   (``GENERIC_VALUES``), or an extracted entry with a confidence under ``min_confidence``.
   Explicit and imported entries are the user's own words (an import brings them from
   elsewhere) and forbidden entries are rules: none of them is pruned as vague.
4. CAP: while more than ``cap`` entries remain, the least useful goes: explicit before
   background, then higher confidence, then newer, then the first key; forbidden entries
   are never dropped (so forbidden entries alone can leave the memory over the cap).

Each step runs until nothing in it applies, and later steps only delete, so planning
again on the result of a plan finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from recall.domain.memory import Category, MemoryEntry, Scope, Source, is_active, plain_text
from recall.domain.same_meaning import (
    contradicts,
    duplicates,
    newest_first,
    opposed,
    when_said,
    words,
)

# Values that say nothing, compared as their lowercased words joined by one space.
GENERIC_VALUES = frozenset(
    {
        "ok",
        "okay",
        "yes",
        "no",
        "sure",
        "fine",
        "good",
        "great",
        "nice",
        "cool",
        "thanks",
        "thank you",
        "thing",
        "things",
        "stuff",
        "something",
        "whatever",
        "none",
        "n a",
        "na",
        "tbd",
        "todo",
        "misc",
        "other",
        "etc",
    }
)


class ConsolidationStep(StrEnum):
    MERGE = "merge"
    RESOLVE = "resolve"
    PRUNE = "prune"
    CAP = "cap"


class ConsolidationAction(BaseModel):
    """Delete ``deleted``; ``kept`` is the entry that stands in its place (merge, resolve)."""

    model_config = ConfigDict(frozen=True)

    step: ConsolidationStep
    deleted: MemoryEntry
    kept: MemoryEntry | None = None
    reason: str


class ConsolidationPlan(BaseModel):
    """The deletions, in the order they were decided; empty when memory is already tidy."""

    model_config = ConfigDict(frozen=True)

    actions: tuple[ConsolidationAction, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.actions


def _ordered(
    entries: Sequence[MemoryEntry], first: Callable[[MemoryEntry], tuple[float, ...]]
) -> list[MemoryEntry]:
    """Sorted by ``first`` (ascending), then newest, then key: a total order, so the plan
    does not depend on the order entries were read in."""
    return sorted(newest_first(entries), key=first)


def _keep_first(entry: MemoryEntry) -> tuple[float, ...]:
    return (entry.source != Source.EXPLICIT, entry.category != Category.FORBIDDEN)


def _stands_first(entry: MemoryEntry) -> tuple[float, ...]:
    return (entry.source != Source.EXPLICIT,)


def _most_useful_first(entry: MemoryEntry) -> tuple[float, ...]:
    return (entry.source != Source.EXPLICIT, -entry.confidence)


def _merge(entries: list[MemoryEntry]) -> list[ConsolidationAction]:
    actions: list[ConsolidationAction] = []
    gone: set[str] = set()
    order = _ordered(entries, _keep_first)
    for position, kept in enumerate(order):
        if kept.key in gone:
            continue
        for other in order[position + 1 :]:
            if other.key in gone or not duplicates(kept, other):
                continue
            # A forbidden copy of a rule is still a rule: only a contradiction removes it
            if other.category == Category.FORBIDDEN:
                continue
            gone.add(other.key)
            actions.append(
                ConsolidationAction(
                    step=ConsolidationStep.MERGE,
                    deleted=other,
                    kept=kept,
                    reason=(
                        f"merged {other.key!r} ({other.value!r}) into {kept.key!r} "
                        f"({kept.value!r}): the same rule saved twice"
                    ),
                )
            )
    return actions


def _resolution(winner: MemoryEntry, loser: MemoryEntry) -> str | None:
    """Why ``winner`` (earlier in the standing order) deletes ``loser``, or None."""
    if not contradicts(winner, loser):
        return None
    said = f"{loser.key!r} ({loser.value!r})"
    over = f"{winner.key!r} ({winner.value!r})"
    if loser.category == Category.FORBIDDEN:
        if when_said(winner) > when_said(loser) and opposed(winner, loser):
            return f"forbidden {said} is explicitly contradicted by the newer {over}"
        return None
    if winner.source == Source.EXPLICIT and loser.source != Source.EXPLICIT:
        return f"{said} contradicts the explicit {over}; background never overrides explicit"
    if when_said(winner) == when_said(loser):
        return f"{said} contradicts {over}, said at the same moment; kept the first key"
    return f"{said} contradicts the newer {over}; the newer stands"


def _resolve(entries: list[MemoryEntry]) -> list[ConsolidationAction]:
    actions: list[ConsolidationAction] = []
    gone: set[str] = set()
    order = _ordered(entries, _stands_first)
    for position, winner in enumerate(order):
        if winner.key in gone:
            continue
        for loser in order[position + 1 :]:
            if loser.key in gone:
                continue
            reason = _resolution(winner, loser)
            if reason is not None:
                gone.add(loser.key)
                actions.append(
                    ConsolidationAction(
                        step=ConsolidationStep.RESOLVE, deleted=loser, kept=winner, reason=reason
                    )
                )
    return actions


# The sources whose words a model chose, not the user: only these can be pruned as vague.
_PRUNABLE = frozenset({Source.EXTRACTED, Source.CONSOLIDATED})


def _vagueness(entry: MemoryEntry, min_value_chars: int, min_confidence: float) -> str | None:
    """Why an entry the background wrote is too vague to keep, or None."""
    if entry.source not in _PRUNABLE or entry.category == Category.FORBIDDEN:
        return None
    value = plain_text(entry.value)
    if " ".join(words(value)) in GENERIC_VALUES:
        return f"vague: {entry.key!r} says only {value!r}"
    if len(value) < min_value_chars:
        return f"vague: {entry.key!r} ({value!r}) is under {min_value_chars} characters"
    if entry.source == Source.EXTRACTED and entry.confidence < min_confidence:
        return (
            f"vague: {entry.key!r} was extracted with confidence {entry.confidence}, "
            f"under {min_confidence}"
        )
    return None


def _prune(
    entries: list[MemoryEntry], min_value_chars: int, min_confidence: float
) -> list[ConsolidationAction]:
    actions: list[ConsolidationAction] = []
    for entry in sorted(entries, key=lambda entry: entry.key):
        reason = _vagueness(entry, min_value_chars, min_confidence)
        if reason is not None:
            actions.append(
                ConsolidationAction(step=ConsolidationStep.PRUNE, deleted=entry, reason=reason)
            )
    return actions


def _cap(entries: list[MemoryEntry], cap: int) -> list[ConsolidationAction]:
    droppable = _ordered(
        [entry for entry in entries if entry.category != Category.FORBIDDEN], _most_useful_first
    )
    over = max(0, len(entries) - cap)
    dropped = list(reversed(droppable))[:over]
    return [
        ConsolidationAction(
            step=ConsolidationStep.CAP,
            deleted=entry,
            reason=f"over the cap of {cap}: {entry.key!r} is the least useful entry left",
        )
        for entry in dropped
    ]


def _without(entries: list[MemoryEntry], actions: list[ConsolidationAction]) -> list[MemoryEntry]:
    gone = {action.deleted.key for action in actions}
    return [entry for entry in entries if entry.key not in gone]


def plan_consolidation(
    entries: Sequence[MemoryEntry],
    now: datetime,
    *,
    cap: int,
    min_value_chars: int,
    min_confidence: float,
) -> ConsolidationPlan:
    """The deletions that tidy one user's project memory (see the module text): merge,
    resolve, prune, cap, in that order. Same entries in any order, same plan."""
    considered = [
        entry for entry in entries if entry.scope == Scope.PERSISTENT and is_active(entry, now)
    ]
    if len({entry.key for entry in considered}) != len(considered):
        raise ValueError("a project holds one persistent entry per key")
    actions = _merge(considered)
    actions += _resolve(_without(considered, actions))
    actions += _prune(_without(considered, actions), min_value_chars, min_confidence)
    actions += _cap(_without(considered, actions), cap)
    return ConsolidationPlan(actions=tuple(actions))


def apply_plan(entries: Sequence[MemoryEntry], plan: ConsolidationPlan) -> list[MemoryEntry]:
    """The entries a store holds after applying ``plan``: the same entries, in the same
    order, less the deleted ones (persistent entries, by key)."""
    gone = {action.deleted.key for action in plan.actions}
    return [
        entry for entry in entries if not (entry.scope == Scope.PERSISTENT and entry.key in gone)
    ]
