"""Whether something a user said is worth remembering, and as which memory entry.

One deterministic reading of a user's words, shared by every caller that turns chat into
memory (the offline model deciding to call ``save_preference``, background extraction),
so they agree on what counts. It is built for precision: saving chatter is worse than
missing a rule, because a wrong entry reaches every later prompt of the project, while a
missed rule can simply be said again. So it says yes only to a statement in the user's
own voice that holds beyond this message:

- a standing instruction: imperative or normative, with a durable marker ("always",
  "from now on", "every time", "by default", "each", "all", "whenever") or a forbidding
  one ("never", "don't", "avoid", "stop using", "no more");
- a stated preference ("I prefer", "I'd rather", "we like", "my favourite");
- a fact about the business ("we sell...", "our store opens...", "I run a...");
- a decision already taken ("we decided...", "we went with...");
- anything introduced with "remember that", "just so you know" or "for the record".

And it says no to questions (by their mark, an opening interrogative or an inverted
auxiliary), hypotheticals and hedges ("what if", "if ... would", "maybe", "might"),
reported speech ("my boss said..."), past events ("yesterday I never got..."), requests
scoped to this reply ("just this once", "in this draft") and everything with no marker at
all, which is where one-off requests ("make this paragraph shorter") and chit-chat land.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import hashlib
from typing import Final
import unicodedata

from recall.domain.memory import Category, MemoryEntry, plain_text
from recall.domain.same_meaning import Polarity, changed_value, fold, polarity
from recall.domain.tools import MAX_VALUE_LENGTH
from recall.domain.utterance_patterns import (
    BRAND,
    BUSINESS_FACT,
    COMPARATIVE,
    CONTRACTIONS,
    DECIDED,
    DEICTIC,
    FORBIDDING,
    HABIT,
    HYPOTHETICAL,
    IDIOMS,
    IMPERATIVE_DONT,
    LEAD_IN,
    LIKING,
    LIMIT,
    NORM,
    NOT_A_VERB,
    NOT_FORBIDDING,
    ONE_OFF,
    OPENER,
    PAST_EVENT,
    QUESTION,
    REPORTED,
    SENTENCE_END,
    SETTING,
    STRONG_MARKER,
    THREAD_SCOPE,
    UNDECIDED,
    WIDE_MARKER,
    WORD,
)

MAX_KEY_WORDS: Final = 4
_MAX_KEY_BODY: Final = 60  # leaves room for the "no_" of a forbidden entry within 64
_SUFFIX_CHARS: Final = 8  # a key's stable suffix: hex digits of the rule's words

# Confidence of each kind of evidence: how sure a reading is that the words hold a rule.
_EXPLICIT: Final = 0.95  # "remember that ..."
_STRONG: Final = 0.9  # always, never, from now on, every time
_STATED: Final = 0.85  # avoid, stop using, I prefer, our tone is, we decided
_PLAIN: Final = 0.75  # don't + verb, each/all/every, should/must
_FACT: Final = 0.65  # we sell..., our store opens...
_CORROBORATED: Final = 0.05  # added when a second, independent kind of evidence agrees


@dataclass(frozen=True)
class MemoryProposal:
    """A memory entry a user's words propose; a caller decides whether to save it."""

    key: str
    value: str
    category: Category
    confidence: float


def propose_memories(message: str) -> list[MemoryProposal]:
    """One proposal per sentence of the message worth remembering, first key wins."""
    proposals: dict[str, MemoryProposal] = {}
    for sentence in sentences(message):
        proposal = propose_memory(sentence)
        if proposal is not None:
            proposals.setdefault(proposal.key, proposal)
    return list(proposals.values())


def carries_signals(message: str) -> bool:
    """Whether a user's message states something worth remembering: what makes its thread
    due an extraction, now or once it is long enough."""
    return bool(propose_memories(message))


def for_this_conversation(text: str) -> bool:
    """Whether words say they hold for this conversation alone ("in this chat, ..."): a
    thread entry, never project memory."""
    return THREAD_SCOPE.search(_folded(text)) is not None


def propose_memory(sentence: str) -> MemoryProposal | None:
    """The entry one sentence proposes, or None when it holds nothing worth remembering."""
    stated = plain_text(sentence)
    value = LEAD_IN.sub("", stated).rstrip(" .!;").strip()
    if not content_words(value) and value.isascii():
        return None  # "I prefer", "Never!": markers with nothing to keep
    body, flagged = _body(stated)
    if not body:
        return None
    found = _reading(body)
    if found is None:
        if not flagged:
            return None
        found = (_category_of_content(body), _EXPLICIT)
    category, confidence = found
    if flagged:
        confidence = max(confidence, _EXPLICIT)
    forbidden = category is Category.FORBIDDEN
    return MemoryProposal(
        key=memory_key(OPENER.sub("", _folded(value)), forbidden=forbidden),
        value=value[:MAX_VALUE_LENGTH].rstrip(),
        category=category,
        confidence=round(min(confidence, _EXPLICIT), 2),
    )


def memory_key(
    statement: str, *, forbidden: bool = False, max_words: int | None = MAX_KEY_WORDS
) -> str:
    """A stable key from the words of a statement that carry its meaning: its first
    ``max_words`` (all of them with ``None``, as far as a key's length allows).

    Stable because saying the same rule again must update its entry, not add a second
    one: case, punctuation, accents, filler and scope phrases do not change it.
    """
    words = _key_words(statement)
    key = "_".join(words[:max_words])[:_MAX_KEY_BODY].strip("_")
    if not key:
        key = "note_" + hashlib.sha256(statement.strip().encode()).hexdigest()[:_SUFFIX_CHARS]
    return _forbidding(key) if forbidden else key


def place_proposal(proposal: MemoryProposal, held: Sequence[MemoryEntry]) -> str:
    """The key a save of ``proposal`` writes, given the entries ``held`` in its scope.

    Its own key (``memory_key``) when that is free or holds the same rule (restated, with
    a changed value, or a rule the key's first words already name); else the key of a
    held entry whose value it changes ("keep the header light" after ``header_dark``:
    "keep the header dark"), as the tool instructions ask a model to; else, when its key
    holds a different rule that shares the first words ("... on the checkout page" and
    "... in newsletter emails"), a longer key with all its words, or failing that one
    with a stable suffix, so both rules are kept.
    """
    by_key = {entry.key: entry for entry in held}

    def fits(key: str) -> bool:
        return key not in by_key or _same_rule(proposal, by_key[key])

    if proposal.key in by_key and fits(proposal.key):
        return proposal.key
    changed = next((entry.key for entry in held if _changes_value(proposal, entry)), None)
    if changed is not None:
        return changed
    longer, suffixed = _longer_keys(proposal)
    return next((key for key in (proposal.key, longer) if fits(key)), suffixed)


def _longer_keys(proposal: MemoryProposal) -> tuple[str, str]:
    """The proposal's key with all its words, and with a suffix stable for its words."""
    forbidden = proposal.category is Category.FORBIDDEN
    longer = memory_key(
        OPENER.sub("", _folded(proposal.value)), forbidden=forbidden, max_words=None
    )
    words = " ".join(sorted(_rule_words(proposal.value)))
    digest = hashlib.sha256(words.encode()).hexdigest()[:_SUFFIX_CHARS]
    body = longer.removeprefix("no_") if forbidden else longer
    suffixed = f"{body[: _MAX_KEY_BODY - _SUFFIX_CHARS - 1].strip('_')}_{digest}"
    return longer, _forbidding(suffixed) if forbidden else suffixed


def _same_rule(proposal: MemoryProposal, entry: MemoryEntry) -> bool:
    """The held entry says the proposal's rule: every word the proposal's key had to
    leave out is in the entry's value too (a key that holds all of a rule's words names
    that rule), or the proposal changes the entry's value."""
    statement = OPENER.sub("", _folded(proposal.value))
    left_out = {fold(word) for word in _key_words(statement)[MAX_KEY_WORDS:]}
    return left_out <= _rule_words(entry.value) or _changes_value(proposal, entry)


def _changes_value(proposal: MemoryProposal, entry: MemoryEntry) -> bool:
    """The proposal gives the held entry's thing another value on a scale (see
    ``recall.domain.same_meaning``): one category, neither a prohibition."""
    if proposal.category is not entry.category:
        return False
    said = MemoryEntry(key=entry.key, value=proposal.value, category=proposal.category)
    if Polarity.NEGATIVE in {polarity(said), polarity(entry)}:
        return False
    return changed_value(_rule_words(proposal.value), _rule_words(entry.value))


def _rule_words(value: str) -> frozenset[str]:
    """What a stated rule is about: the words its key is made of, every one, folded."""
    return frozenset(fold(word) for word in _key_words(OPENER.sub("", _folded(value))))


def _key_words(statement: str) -> list[str]:
    return content_words(THREAD_SCOPE.sub(" ", _folded(statement)))


def _forbidding(key: str) -> str:
    return key if key.startswith("no_") else f"no_{key}"


def content_words(text: str) -> list[str]:
    """The words of a text that carry meaning, in order: no filler, no rule markers."""
    return [word for word in WORD.findall(_folded(text).replace("'", "")) if word not in _FILLER]


def sentences(message: str) -> list[str]:
    """The message cut at sentence ends, so each rule in it is read on its own."""
    return [part for part in SENTENCE_END.split(message) if part.strip()]


# --- reading -------------------------------------------------------------------------------


def _reading(body: str) -> tuple[Category, float] | None:
    """The category and confidence of a sentence's body, or None if it is not a rule."""
    if QUESTION.search(body) or HYPOTHETICAL.search(body) or REPORTED.search(body):
        return None
    if HABIT.search(body):
        return None
    if DECIDED.search(body) and not UNDECIDED.search(body):
        return Category.HISTORY, _STATED
    if ONE_OFF.search(body) or PAST_EVENT.search(body):
        return None
    main = _main_clause(body)
    strong = bool(STRONG_MARKER.search(body))
    # "this", "it" in the clause that gives the instruction point at today's draft, and so
    # does a comparative, unless a durable marker says otherwise.
    pointed = bool(DEICTIC.search(main.split(",")[0])) or (
        not strong and bool(COMPARATIVE.search(body))
    )
    liking = bool(LIKING.search(body))
    norm = bool(NORM.search(body))
    evidence: list[tuple[Category | None, float]] = []
    if FORBIDDING.search(body) and not NOT_FORBIDDING.search(body):
        plain_dont = bool(IMPERATIVE_DONT.search(body)) and not strong
        if not (plain_dont and pointed):
            evidence.append((Category.FORBIDDEN, _PLAIN if plain_dont else _STATED))
    if strong:
        evidence.append((None, _STRONG))
    if liking and not pointed:
        evidence.append((None, _STATED))
    wide = WIDE_MARKER.search(body) and (
        liking or norm or LIMIT.match(main) or not NOT_A_VERB.match(main)
    )
    if (wide or norm) and not pointed:
        evidence.append((None, _PLAIN))
    brand = BRAND.search(body)
    if BUSINESS_FACT.search(body):
        evidence.append((Category.BRAND if brand else Category.CONTEXT, _FACT))
    if not evidence:
        return None
    confidence = max(level for _, level in evidence)
    if len(evidence) > 1:
        confidence += _CORROBORATED
    named = {category for category, _ in evidence}
    if Category.FORBIDDEN in named:
        return Category.FORBIDDEN, confidence
    if brand:
        return Category.BRAND, confidence
    # A fact is only context when nothing in it asks for a way of working.
    return (Category.PREFERENCES if None in named else Category.CONTEXT), confidence


def _main_clause(body: str) -> str:
    """The clause after a leading "when you ...," or "on every page,": the instruction."""
    if SETTING.match(body) and "," in body:
        return body.split(",", 1)[1].strip()
    return body


def _category_of_content(body: str) -> Category:
    """The category of something the user asked to keep without saying what kind it is."""
    if DECIDED.search(body):
        return Category.HISTORY
    if FORBIDDING.search(body) and not NOT_FORBIDDING.search(body):
        return Category.FORBIDDEN
    if BRAND.search(body):
        return Category.BRAND
    if LIKING.search(body) or STRONG_MARKER.search(body):
        return Category.PREFERENCES
    return Category.CONTEXT


def _body(stated: str) -> tuple[str, bool]:
    """The sentence as the rules read it, and whether it asked to be remembered.

    Lower case, contractions spelled out, idioms that borrow rule words ("never mind")
    and openers that state nothing ("ok so", "thanks") removed.
    """
    text = _folded(stated)
    for pattern, replacement in CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = IDIOMS.sub(" ", text)
    flagged = False
    while True:
        before = text
        text = OPENER.sub("", text)
        if lead_in := LEAD_IN.match(text):
            text, flagged = text[lead_in.end() :], True
        if text == before:
            break
    return " ".join(text.split()).strip(" ,;:-"), flagged


def _folded(text: str) -> str:
    """Lower case ASCII where it can be: curly quotes straightened, accents dropped."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


# Words that carry no meaning of their own in a stated rule ("always keep the ...").
_FILLER_WORDS: Final = """
    a an the and or but of to in on at for with by from as is are be been being it its
    this that these those there here my our your their we you i me us they he she them
    always never dont do does not no remember prefer id im ive would please should must
    keep use using make made let lets want like just also all any every each some more
    most very really can could will so than then when what which who how about forget
    stop remembering preference preferences memory entry rule avoid ever going forward
    now whenever everywhere anywhere throughout default general hate love rather
    favourite favorite fan big sure note record know again think ok okay were youre
    theyre weve thats whats cant wont isnt arent doesnt
"""
_FILLER: Final = frozenset(_FILLER_WORDS.split())
