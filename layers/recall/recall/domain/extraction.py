"""What a background extraction writes, and what two entries mean to each other.

Extraction proposes entries (``source=extracted``, with a confidence) from recent turns;
``decide_extraction`` turns them into one decision each: ADD a new entry, UPDATE a stored
one, or NONE with the reason. Three things the user did stop a candidate whatever it
says: the thread holds it as a thread entry (the user scoped it to this conversation, so it
never becomes project memory), an explicit entry contradicts it (the user said otherwise,
perhaps reversing the very message it was read from), or the user deleted its key (a
``DELETE`` or the forget tool) after the message it was said in (``deleted_since_said``).
Nor does a candidate change a stored entry said after it: a late job, or a thread read
after another, never puts the user's earlier word back over a later one.
Consolidation (``recall.domain.consolidation``) compares stored entries with the same
definitions, so the two never disagree on what a duplicate or a contradiction is. The
definitions are word rules, deterministic by design:

* Words: a text is lowercased, apostrophes dropped ("don't" is "dont") and split at every
  character that is not a letter or digit. A word is folded: a plural ``-ies`` becomes
  ``-y``, a final ``-s`` goes (not ``-ss`` or ``-us``), and British ``-our`` becomes
  ``-or`` in words of six letters or more ("colours" is "color", "hour" stays "hour").
* Subject of a key: the folded words of the key without filler words ("the", "of"...),
  polarity words and words that only repeat the entry's own category. ``header_dark``
  and ``dark_header`` are {dark, header}; ``brand_tone`` in brand is {tone}, as is
  ``tone``; ``no_stock_photos`` and ``use_stock_photos`` are both {stock, photo}. A key
  made only of such words keeps all its words, so no subject is empty. Two entries are
  about the same subject when they have the same key or their key subjects are equal.
* Same value: two values are the same when their wording is the same after folding case,
  whitespace, punctuation and plurals, dropping "a", "an", "the", "please" and the
  positive polarity words, and reading every negative word as "not": "Use a dark
  header." is "dark header"; "Don't use stock photos" is "avoid stock photos". Word
  order still counts ("red, not blue" is not "blue, not red").
* Duplicate: the same value, and either the same subject or keys that both name what the
  value says (every subject word of each key occurs in the value): ``no_stock_photos``
  and ``avoid_stock_photos`` with "never use stock photos" are duplicates;
  ``header_color: dark`` and ``header_font: dark`` are not.
* Polarity of an entry, read from its value: negative when a word is one of never, no,
  not, don't, doesn't, avoid, without; positive when a word is one of always, use, uses,
  using, do (and none is negative); neutral otherwise. A ``forbidden`` entry is negative
  by its category, whatever its words.
* Changed value: two sets of words that share at least one word and differ in exactly one
  word each, those two words being values on one scale (``SCALES``: shades, colours,
  sizes, lengths, formality, alignment, currencies): {header, dark} and {header, light}
  name one thing with two values; {header, dark} and {footer, dark}, or {buttons,
  checkout} and {buttons, homepage}, name two things. The scales are a short closed list
  on purpose: a pair they miss is kept as two rules, which costs a line of prompt, while a
  pair they wrongly joined would lose a rule.
* Contradiction: the same subject with a different value; or opposed entries (do vs
  don't) where the subject words of one value contain the other's: "never use stock
  photos" and "use stock photos for the blog"; or two entries of one category, neither
  negative, whose key subjects are a changed value and whose values differ, on their
  scales, by no more than those two values: "keep the header dark" (``header_dark``) and
  "keep the header light" (``header_light``), but not "the black logo on light
  backgrounds" (``logo_black``) and "the white logo on dark backgrounds" (``logo_white``),
  two settings. Two prohibitions ("no dark header", "no light header") never contradict.
* When an entry was said (``said_at``): for an extracted entry, the time of the user
  message it was read from; for any other, when it was written (``updated_at``). "Newer"
  always means said later: an old message extracted today is still old.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
import re

from pydantic import BaseModel, ConfigDict

from recall.domain.clock import parse
from recall.domain.memory import Action, Category, HistoryRecord, MemoryEntry, Source, plain_text
from recall.domain.messages import Message

_NOT_A_WORD = re.compile(r"[^a-z0-9]+")
_APOSTROPHES = re.compile(r"['’‘`]")

NEGATIVE_WORDS = frozenset({"never", "no", "not", "dont", "doesnt", "avoid", "without"})
POSITIVE_WORDS = frozenset({"always", "use", "uses", "using", "do"})
_POLARITY_WORDS = NEGATIVE_WORDS | POSITIVE_WORDS
# Words that say nothing about what an entry is about.
_FILLER = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "for",
        "to",
        "in",
        "on",
        "at",
        "by",
        "with",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "my",
        "our",
        "we",
        "i",
        "please",
    }
)
# Words a value can drop without saying something else.
_SILENT_IN_VALUES = frozenset({"a", "an", "the", "please"})
# Key words that only repeat the category the entry is filed under.
_CATEGORY_WORDS: dict[Category, frozenset[str]] = {
    Category.BRAND: frozenset({"brand"}),
    Category.PREFERENCES: frozenset(
        {"pref", "prefs", "prefer", "prefers", "preferred", "preference", "preferences"}
    ),
    Category.FORBIDDEN: frozenset({"forbidden", "banned"}),
    Category.CONTEXT: frozenset({"context"}),
    Category.HISTORY: frozenset({"history"}),
}


class Polarity(StrEnum):
    NEGATIVE = "negative"
    NEUTRAL = "neutral"
    POSITIVE = "positive"


def words(text: str) -> list[str]:
    """The words of a text, lowercased, apostrophes dropped, unfolded."""
    lowered = _APOSTROPHES.sub("", plain_text(text).lower())
    return [word for word in _NOT_A_WORD.split(lowered) if word]


def fold(word: str) -> str:
    """One spelling for a word's plural and British forms, so "colours" meets "color"."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us")):
        word = word[:-1]
    if len(word) >= 6 and word.endswith("our"):
        word = word[:-3] + "or"
    return word


# Words that are values on one scale: two of a scale are two answers to one question.
SCALES: tuple[frozenset[str], ...] = tuple(
    frozenset(fold(word) for word in scale.split())
    for scale in (
        "dark light bright pale muted",
        "black white grey red orange yellow green blue purple pink brown navy teal beige",
        "small medium large big tiny huge",
        "short long brief",
        "formal informal casual",
        "left right center",
        "eur euro usd dollar gbp pound",
    )
)


def changed_value(one: frozenset[str], other: frozenset[str]) -> bool:
    """One thing named with two values: one word each apart, both on one scale."""
    mine, theirs = one - other, other - one
    if len(mine) != 1 or len(theirs) != 1 or not one & other:
        return False
    pair = mine | theirs
    return any(pair <= scale for scale in SCALES)


def key_subject(entry: MemoryEntry) -> frozenset[str]:
    """What the entry's key is about: its folded content words (see the module text)."""
    key_words = words(entry.key)
    dropped = _FILLER | _POLARITY_WORDS | _CATEGORY_WORDS[entry.category]
    content = [word for word in key_words if word not in dropped]
    return frozenset(fold(word) for word in (content or key_words))


def value_subject(entry: MemoryEntry) -> frozenset[str]:
    """What the entry's value is about: its folded words without filler or polarity."""
    dropped = _FILLER | _POLARITY_WORDS
    return frozenset(fold(word) for word in words(entry.value) if word not in dropped)


def value_wording(value: str) -> tuple[str, ...]:
    """The value as compared for sameness: folded words in order, negatives read as "not"."""
    wording: list[str] = []
    for word in words(value):
        if word in _SILENT_IN_VALUES or word in POSITIVE_WORDS:
            continue
        folded = "not" if word in NEGATIVE_WORDS else fold(word)
        if not (folded == "not" and wording and wording[-1] == "not"):
            wording.append(folded)
    return tuple(wording) or (plain_text(value).lower(),)


def polarity(entry: MemoryEntry) -> Polarity:
    """Whether the entry says to do or not to do something; forbidden is always "not"."""
    if entry.category == Category.FORBIDDEN:
        return Polarity.NEGATIVE
    said = set(words(entry.value))
    if said & NEGATIVE_WORDS:
        return Polarity.NEGATIVE
    if said & POSITIVE_WORDS:
        return Polarity.POSITIVE
    return Polarity.NEUTRAL


def opposed(first: MemoryEntry, second: MemoryEntry) -> bool:
    """One says do and the other says don't; a neutral entry opposes nothing."""
    return {polarity(first), polarity(second)} == {Polarity.NEGATIVE, Polarity.POSITIVE}


def same_subject(first: MemoryEntry, second: MemoryEntry) -> bool:
    """One key is one subject, whatever the category; otherwise equal key subjects."""
    return first.key == second.key or key_subject(first) == key_subject(second)


def same_value(first: MemoryEntry, second: MemoryEntry) -> bool:
    return value_wording(first.value) == value_wording(second.value)


def contradicts(first: MemoryEntry, second: MemoryEntry) -> bool:
    """Both cannot hold: one subject with two values, a rule and its opposite, or one
    thing given two values on a scale (see the module text)."""
    if same_subject(first, second) and not same_value(first, second):
        return True
    one, other = value_subject(first), value_subject(second)
    nested = bool(one) and bool(other) and (one <= other or other <= one)
    if nested and opposed(first, second):
        return True
    return (
        first.category == second.category
        and Polarity.NEGATIVE not in {polarity(first), polarity(second)}
        and changed_value(key_subject(first), key_subject(second))
        and _values_change_only(first, second, key_subject(first) ^ key_subject(second))
        and not same_value(first, second)
    )


def _scale_words(subject: frozenset[str]) -> frozenset[str]:
    return frozenset(word for word in subject if any(word in scale for scale in SCALES))


def _values_change_only(first: MemoryEntry, second: MemoryEntry, pair: frozenset[str]) -> bool:
    """The values differ on their scales by no more than the keys' two values: "the black
    logo on light backgrounds" and "the white logo on dark backgrounds" name two settings,
    each a rule of its own, not one logo given two colours."""
    said = _scale_words(value_subject(first)) ^ _scale_words(value_subject(second))
    return said <= pair


def when_said(entry: MemoryEntry) -> str:
    """When the user said the entry: an extracted entry's message time, else its write."""
    return entry.said_at or entry.updated_at


def duplicates(first: MemoryEntry, second: MemoryEntry) -> bool:
    """The same value about the same thing: two saves of one rule."""
    if not same_value(first, second):
        return False
    if same_subject(first, second):
        return True
    return key_subject(first) <= value_subject(first) and key_subject(second) <= value_subject(
        second
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


def newest_first(entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """Newest said first (``said_at``; stamps sort as text), then key: a total order."""
    by_key = sorted(entries, key=lambda entry: entry.key)
    return sorted(by_key, key=when_said, reverse=True)


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
