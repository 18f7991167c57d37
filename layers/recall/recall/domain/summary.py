"""The rolling summary of a thread: what the model keeps of the messages that left its window.

When the window moves on, the user and assistant messages leaving it are folded into the
thread's summary, which the next prompt carries as its "summary of earlier turns" layer.
``fold`` does this offline, deterministically, by extraction; ``summary_prompt`` and
``summary_from_reply`` let a service ask a model for the same structure instead.

The text is a few labelled sections, one point a line::

    Facts:
    - We sell candles
    Decisions:
    - We'll go with the navy header
    Open questions:
    - Should we sell abroad?

It never exceeds the caller's ``max_chars``: the oldest point of the longest section goes
first, so every kind keeps its newest points, and nothing is cut mid-word.
"""

from __future__ import annotations

from collections.abc import Iterable
import re
from typing import Final, Literal, get_args

from pydantic import BaseModel, ConfigDict

from recall.domain.messages import Message
from recall.domain.prompt import ModelReply
from recall.domain.window import belongs_in_window

PointKind = Literal["facts", "decisions", "open_questions"]

KINDS: Final[tuple[PointKind, ...]] = get_args(PointKind)
LABELS: Final[dict[PointKind, str]] = {
    "facts": "Facts:",
    "decisions": "Decisions:",
    "open_questions": "Open questions:",
}
POINT_MARK: Final = "- "
CUT_MARK: Final = "…"

_SPACES = re.compile(r"[\s\x00-\x1f\x7f\u2028\u2029]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_BULLET = re.compile(r"^(?:[-*•>]+|\d+[.)])\s+")
_MARKUP = re.compile(r"[*`]+")
# Courtesies that open a sentence ("Great, we'll go with navy") and say nothing themselves.
_OPENING_COURTESY = re.compile(
    r"^(?:(?:hi|hello|hey|ok|okay|great|perfect|sure|thanks|thank you|yes|yeah|yep|cool|nice"
    r"|awesome|alright|right|so|well|good|excellent|got it|sounds good|understood)"
    r"\s*[,.!:;—–-]+\s*|(?:hi|hello|hey|ok|okay|so|yes|yeah|yep)\s+)+",
    re.IGNORECASE,
)
_THANKS = re.compile(r"^(?:thanks|thank you|thx|ty|cheers)\b")
_TRAILING = re.compile(r"[\s.!;:,]+$")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
_DECISION = re.compile(
    r"(?<!not )(?<!n't )(?<!never )(?<!yet )\b(?:decided|agreed|settled on|go with|going with"
    r"|stick with|sticking with|chose|chosen|picked|locked in|confirmed|let's use|lets use)\b"
)
# How an assistant confirms what was settled: "Confirmed: the launch is on March 3".
_CONFIRMATION = re.compile(r"^(?:confirmed|agreed|decided|settled|locked in|noted)\b")
# Asking the assistant to do something is a request, not a fact or an open question.
_REQUEST = re.compile(
    r"^(?:please\b|can you\b|could you\b|would you\b|will you\b|i want you to\b"
    r"|i'd like you to\b|help me\b|let's\b|lets\b|(?:write|make|draft|give|suggest|show|tell"
    r"|create|generate|rewrite|explain|describe|compare|summarise|summarize|translate"
    r"|brainstorm)\b)"
)
# Words that carry no subject of their own: a sentence of only these is chit-chat, and
# sharing only these does not make a reply the answer to a question.
_PLAIN_WORD_LIST: Final = """
    a an the and or but if of to in on at for with by from as into about over than then so
    too very just also only even is are was were be been being am do does did doing done
    have has had having can could will would shall should may might must i me my mine we us
    our ours you your yours he him his she her hers it its they them their theirs this that
    these those there here what which who whom whose when where why how whether not no nor
    any some all each every both either neither more most less much many few other such own
    same i'm i've i'd i'll we're we've we'd we'll you're you've you'd you'll it's that's
    there's what's let's lets don't doesn't didn't isn't aren't wasn't weren't won't
    wouldn't can't cannot couldn't shouldn't haven't hasn't hadn't get got go going want
    think know like make need one thing something anything way really now
    hi hello hey thank thanks thx ty ok okay k great cool nice sure yes yeah yep yup nope good
    fine awesome perfect excellent amazing lovely wonderful alright right morning afternoon
    evening night bye goodbye cheers please welcome lol haha sound sounds work works gotcha
    noted love well wow oh ah hmm indeed absolutely exactly totally appreciate appreciated
    help helping helpful glad happy
"""
_PLAIN_WORDS: Final = frozenset(_PLAIN_WORD_LIST.split())


class RollingSummary(BaseModel):
    """The summary of a thread's earlier turns and how far into the thread it reaches.

    Message ids are time-ordered, so a message at or before ``covers_through`` is already
    in the text and folding it again changes nothing. ``messages_covered`` counts the user
    and assistant messages folded in so far."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    covers_through: str | None = None
    messages_covered: int = 0


def uncovered(summary: RollingSummary | None, leaving: Iterable[Message]) -> list[Message]:
    """The leaving messages a fold would add, oldest first: user messages and complete
    replies newer than ``covers_through`` (tool rounds and failed replies never count)."""
    through = summary.covers_through if summary else None
    fresh = {
        message.message_id: message
        for message in leaving
        if belongs_in_window(message) and (through is None or message.message_id > through)
    }
    return [fresh[message_id] for message_id in sorted(fresh)]


def fold(
    summary: RollingSummary | None,
    leaving: list[Message],
    max_chars: int,
    *,
    point_max_chars: int | None = None,
) -> RollingSummary:
    """The summary with the leaving messages folded in, offline and deterministically.

    Kept: the user's statements (facts), decisions either side states or confirms, and the
    user's questions no later reply or decision answers (a question is answered by one that
    mentions a word of its subject). Dropped: chit-chat, requests to the assistant and the
    assistant's own prose. ``point_max_chars`` bounds one point, so one long sentence cannot
    push every other point out.
    """
    previous = summary or RollingSummary()
    fresh = uncovered(previous, leaving)
    if not fresh:
        return previous
    # A text not written here (older, or set by hand) is kept as facts rather than lost.
    outline = _parsed(previous.text, unlabelled="facts") or _Outline()
    for message in fresh:
        outline.take(message)
    return _folded(previous, fresh, outline, max_chars, point_max_chars)


def summary_from_reply(
    reply: ModelReply,
    summary: RollingSummary | None,
    leaving: list[Message],
    max_chars: int,
    *,
    point_max_chars: int | None = None,
) -> RollingSummary:
    """The summary a model answered to ``summary_prompt``, held to the same structure and
    bound as ``fold``.

    A reply stopped by ``max_tokens`` may end mid-word, so its last line is dropped. A reply
    without the labelled sections is not a summary this module can keep, so the extractive
    fold stands in and the leaving messages are not lost.
    """
    previous = summary or RollingSummary()
    fresh = uncovered(previous, leaving)
    if not fresh:
        return previous
    lines = reply.text.splitlines()
    if reply.stop_reason == "max_tokens":
        lines = lines[:-1]
    outline = _parsed("\n".join(lines))
    if outline is None:
        return fold(previous, fresh, max_chars, point_max_chars=point_max_chars)
    return _folded(previous, fresh, outline, max_chars, point_max_chars)


class _Outline:
    """The points of a summary by kind, oldest first, while a fold runs.

    Each kind maps a point's casefolded text to the point, so a repeated point moves to
    the newest place instead of appearing twice. Open questions are also indexed by the
    words of their subject, so an answer finds them without scanning them all.
    """

    def __init__(self) -> None:
        self.points: dict[PointKind, dict[str, str]] = {kind: {} for kind in KINDS}
        self._asking: dict[str, set[str]] = {}

    def add(self, kind: PointKind, point: str) -> None:
        key = point.casefold()
        section = self.points[kind]
        section.pop(key, None)
        section[key] = point
        if kind == "open_questions":
            for word in _subject(point):
                self._asking.setdefault(word, set()).add(key)

    def answer(self, statement: str) -> None:
        """Close every open question the statement mentions a word of."""
        questions = self.points["open_questions"]
        for word in _subject(statement):
            for key in self._asking.pop(word, set()):
                questions.pop(key, None)

    def take(self, message: Message) -> None:
        """The points of one message; its answers close earlier questions, not its own."""
        asked: list[str] = []
        for sentence in _SENTENCE_END.split(message.content):
            point = _point(sentence)
            plain = point.casefold()
            if not _subject(point) or _THANKS.match(plain):
                continue
            if point.endswith("?"):
                if message.role == "user" and not _REQUEST.match(plain):
                    asked.append(point)
                continue
            decision = bool(
                _DECISION.search(plain)
                or (message.role == "assistant" and _CONFIRMATION.match(plain))
            )
            if message.role == "assistant" or decision:
                self.answer(point)
            if decision:
                self.add("decisions", point)
            elif message.role == "user" and not _REQUEST.match(plain):
                self.add("facts", point)
        for question in asked:
            self.add("open_questions", question)


def _folded(
    previous: RollingSummary,
    fresh: list[Message],
    outline: _Outline,
    max_chars: int,
    point_max_chars: int | None,
) -> RollingSummary:
    return RollingSummary(
        text=_render(_fitted(outline, max_chars, point_max_chars)),
        covers_through=fresh[-1].message_id,
        messages_covered=previous.messages_covered + len(fresh),
    )


def _fitted(
    outline: _Outline, max_chars: int, point_max_chars: int | None
) -> dict[PointKind, list[str]]:
    """The newest points of each kind that fit in ``max_chars`` once rendered."""
    sections: dict[PointKind, list[str]] = {}
    for kind in KINDS:
        points = list(outline.points[kind].values())
        if point_max_chars is not None:
            points = [_clipped(point, point_max_chars) for point in points]
        sections[kind] = [point for point in points if point]
    first = dict.fromkeys(KINDS, 0)  # how many of each kind's oldest points are dropped
    size = _size(sections)
    while size > max_chars:
        remaining = {kind: len(sections[kind]) - first[kind] for kind in KINDS}
        longest = max(KINDS, key=lambda kind: remaining[kind])
        if sum(remaining.values()) <= 1:
            return _last_point_fitted(sections[longest][first[longest] :], longest, max_chars)
        dropped = sections[longest][first[longest]]
        first[longest] += 1
        size -= len(POINT_MARK) + len(dropped) + 1
        if remaining[longest] == 1:
            size -= len(LABELS[longest]) + 1
    return {kind: sections[kind][first[kind] :] for kind in KINDS}


def _last_point_fitted(
    points: list[str], kind: PointKind, max_chars: int
) -> dict[PointKind, list[str]]:
    """A lone point too long for the whole summary, cut at a word to fit (or nothing)."""
    room = max_chars - len(LABELS[kind]) - 1 - len(POINT_MARK)
    clipped = [_clipped(point, room) for point in points]
    fitted: dict[PointKind, list[str]] = {each: [] for each in KINDS}
    fitted[kind] = [point for point in clipped if point]
    return fitted


def _size(sections: dict[PointKind, list[str]]) -> int:
    """The length of ``_render(sections)``, without rendering."""
    size = 0
    for kind in KINDS:
        if sections[kind]:
            size += len(LABELS[kind]) + 1
            size += sum(len(POINT_MARK) + len(point) + 1 for point in sections[kind])
    return max(size - 1, 0)


def _render(sections: dict[PointKind, list[str]]) -> str:
    lines: list[str] = []
    for kind in KINDS:
        if sections[kind]:
            lines.append(LABELS[kind])
            lines.extend(POINT_MARK + point for point in sections[kind])
    return "\n".join(lines)


def _parsed(text: str, unlabelled: PointKind | None = None) -> _Outline | None:
    """The points of a summary's text, or None when it has none of the labels.

    Lines under a label are points with or without their mark. Lines before the first label
    are points of kind ``unlabelled``, or ignored (a model's preamble) when it is None.
    """
    kinds_by_label = {_label_key(label): kind for kind, label in LABELS.items()}
    outline: _Outline | None = _Outline() if unlabelled else None
    kind: PointKind | None = unlabelled
    for line in text.splitlines():
        if not _BULLET.match(line.strip()) and (_label_key(line) in kinds_by_label):
            kind = kinds_by_label[_label_key(line)]
            outline = outline or _Outline()
            continue
        point = _point(line)
        if outline is not None and kind is not None and point:
            outline.add(kind, point)
    return outline


def _label_key(line: str) -> str:
    return line.strip().strip("*#_ ").rstrip(":").strip("*#_ ").casefold()


def _point(sentence: str) -> str:
    """One sentence as a one-line point, without list marks, markup, opening courtesies or
    closing punctuation (a question keeps its mark). Applying it twice changes nothing."""
    point = _SPACES.sub(" ", sentence).replace("\u2019", "'").strip()
    while True:
        shorter = _BULLET.sub("", _MARKUP.sub("", point)).strip()
        shorter = _TRAILING.sub("", _OPENING_COURTESY.sub("", shorter))
        if shorter == point:
            return point
        point = shorter


def _subject(text: str) -> set[str]:
    """The words that say what a sentence is about, plural and singular alike."""
    words: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if word in _PLAIN_WORDS:
            continue
        word = word.removesuffix("'s")
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return words


def _clipped(point: str, limit: int) -> str:
    """The point in at most ``limit`` characters, cut between words and marked; empty when
    not even its first word fits."""
    if len(point) <= limit:
        return point
    if limit <= len(CUT_MARK):
        return ""
    head = point[: limit - len(CUT_MARK)]
    if not point[len(head)].isspace():
        head = head.rsplit(" ", 1)[0] if " " in head else ""
    head = head.rstrip(" ,;:-–—")
    return head + CUT_MARK if head else ""
