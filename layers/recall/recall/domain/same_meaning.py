"""What two memory entries mean to each other: the same subject, the same value, a
duplicate, a contradiction, and which was said later. Extraction
(``recall.domain.extraction``) decides what to write by these definitions and
consolidation (``recall.domain.consolidation``) compares stored entries by them, so the
two never disagree on what a duplicate or a contradiction is. The definitions are word
rules, deterministic by design:

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

from collections.abc import Sequence
from enum import StrEnum
import re

from recall.domain.memory import Category, MemoryEntry, plain_text

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


def newest_first(entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """Newest said first (``said_at``; stamps sort as text), then key: a total order."""
    by_key = sorted(entries, key=lambda entry: entry.key)
    return sorted(by_key, key=when_said, reverse=True)
