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

from dataclasses import dataclass
import hashlib
import re
from typing import Final
import unicodedata

from recall.domain.memory import Category, plain_text
from recall.domain.tools import MAX_VALUE_LENGTH

MAX_KEY_WORDS: Final = 4
_MAX_KEY_BODY: Final = 60  # leaves room for the "no_" of a forbidden entry within 64

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


def propose_memory(sentence: str) -> MemoryProposal | None:
    """The entry one sentence proposes, or None when it holds nothing worth remembering."""
    stated = plain_text(sentence)
    value = _LEAD_IN.sub("", stated).rstrip(" .!;").strip()
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
        key=memory_key(_OPENER.sub("", _folded(value)), forbidden=forbidden),
        value=value[:MAX_VALUE_LENGTH].rstrip(),
        category=category,
        confidence=round(min(confidence, _EXPLICIT), 2),
    )


def memory_key(statement: str, *, forbidden: bool = False) -> str:
    """A stable key from the words of a statement that carry its meaning.

    Stable because saying the same rule again must update its entry, not add a second
    one: case, punctuation, accents, filler and scope phrases do not change it.
    """
    words = content_words(_THREAD_SCOPE.sub(" ", _folded(statement)))
    key = "_".join(words[:MAX_KEY_WORDS])[:_MAX_KEY_BODY].strip("_")
    if not key:
        key = "note_" + hashlib.sha256(statement.strip().encode()).hexdigest()[:8]
    return f"no_{key}" if forbidden and not key.startswith("no_") else key


def content_words(text: str) -> list[str]:
    """The words of a text that carry meaning, in order: no filler, no rule markers."""
    return [word for word in _WORD.findall(_folded(text).replace("'", "")) if word not in _FILLER]


def sentences(message: str) -> list[str]:
    """The message cut at sentence ends, so each rule in it is read on its own."""
    return [part for part in _SENTENCE_END.split(message) if part.strip()]


# --- reading -------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_THREAD_SCOPE = re.compile(r"\b(?:in|for) (?:the rest of )?this (?:conversation|thread|chat)\b")

# Lead-ins that ask for the rest to be kept; stripped from the value, they raise confidence.
_REMEMBER = (
    r"(?:please\s+)?(?:remember|keep in mind|bear in mind|note|do not forget|don['’]t forget)"
    r"(?:\s+that\b|\s*[:,]|\s+(?=our\b|we\b|my\b|i\b))"
    r"|just so you know|so you know|fyi|for the record|for future reference|for reference"
    r"|for context|quick note|one more thing|note to self"
)
_LEAD_IN = re.compile(rf"^(?:{_REMEMBER})[\s,:;-]*", re.IGNORECASE)
# Words that open a sentence without being part of what it states.
_OPENER = re.compile(
    r"^(?:(?:ok|okay|alright|right|so|also|and|oh|btw|by the way|hey|hi|hello|please|pls"
    r"|love it|great|perfect|thanks|thank you|cool|nice|well|anyway|honestly|frankly"
    r"|to be honest|tbh|actually|haha|lol)\b[\s,:;!-]*)+"
)
_IDIOMS = re.compile(
    r"\b(?:never mind|nevermind|do not worry|do not bother|do not mind|no worries|no problem"
    r"|no thanks|no thank you|no idea|no way|do not get me wrong|never heard of|all good"
    r"|never say never|better late than never"
    r"|all set|all done)\b"
)

_CONTRACTIONS: Final = (
    (re.compile(r"\bwon't\b|\bwont\b"), "will not"),
    (re.compile(r"\bcan't\b|\bcant\b|\bcannot\b"), "can not"),
    (
        re.compile(r"\b(do|does|did|is|are|was|were|should|would|could|have|has|had|must)n't\b"),
        r"\1 not",
    ),
    (re.compile(r"\b(do|does|did|is|are|was|were|should|would|could|have|has)nt\b"), r"\1 not"),
    (re.compile(r"\blet's\b|\blets\b"), "let us"),
    (re.compile(r"\b(i)'m\b|\bim\b"), "i am"),
    (re.compile(r"\b(we|you|they)'re\b"), r"\1 are"),
    (re.compile(r"\b(i|we|you|they)'ve\b"), r"\1 have"),
    (re.compile(r"\b(i|we|you|they|it|he|she)'ll\b"), r"\1 will"),
    (re.compile(r"\b(i|we|you|they|it|he|she)'d\b"), r"\1 would"),
    (re.compile(r"\b(it|that|there|what|who|he|she|here)'s\b"), r"\1 is"),
)

# An adverb that may sit between a subject and its verb ("I really prefer").
_ADVERB = (
    r"(?:(?:really|much|generally|usually|definitely|strongly|honestly|also|still|mostly"
    r"|mainly|only|just|actually)\s+)?"
)
_SUBJECT = r"(?:i|you|we|they|he|she|it|this|that|these|those|there|the|my|our|your|their|anyone|anybody|someone|everyone)"  # noqa: E501
_AUXILIARY = r"(?:do|does|did|is|are|was|were|am|can|could|would|will|shall|should|have|has|had|may|might|must)"  # noqa: E501
_QUESTION = re.compile(
    rf"""
    \?\s*$                                               # a question mark
    | ^(?:why|who|whom|whose|which|what)\b               # an interrogative opening
    | ^(?:how|when|where)\s+{_AUXILIARY}\b
    | ^{_AUXILIARY}(?:\s+not)?\s+{_SUBJECT}\b            # an inverted auxiliary
    | ^(?:any\s+idea|anyone\s+know|tell\s+(?:me|us)\s+(?:why|how|what|if|whether|about))\b
    | \b(?:i\s+wonder|i\s+am\s+wondering|i\s+was\s+wondering|wondering\s+(?:if|whether)
        |curious\s+(?:if|whether|why|how)|not\s+sure\s+(?:if|whether))\b
    """,
    re.VERBOSE,
)
_HYPOTHETICAL = re.compile(
    r"""
    ^(?:what\s+if|suppose|supposing|imagine|hypothetically|in\s+theory|assuming
        |let\s+us\s+say|say\s+(?:we|i|you))\b
    | \bif\b.*\b(?:would|could|might)\b                  # an unreal conditional
    | \b(?:maybe|perhaps|possibly|probably|might|not\s+sure|not\s+convinced|i\s+guess
        |thinking\s+(?:about|of)|considering|would\s+be\s+nice|we\s+could|i\s+could)\b
    | \b(?:we|i)\s+may\b
    """,
    re.VERBOSE,
)
_REPORTING = (
    r"(?:said|says|say|saying|told|tells|mentioned|mentions|suggested|suggests|thinks|thought"
    r"|believes|reckons|claims|claimed|insists|insisted|argued|argues|recommended|recommends"
    r"|wants|wanted|asked|asks|keeps\s+saying|kept\s+saying)"
)
_REPORTED = re.compile(
    rf"""
    \b(?!(?:i|we|always|also|just|apparently|really|once|even|never|not|to|please|should
        |must|would|will|can|could|do|and|or)\b)\w+\s+   # a speaker, not "never say"
        (?:(?:always|also|just|apparently|really|once|even)\s+)?
        {_REPORTING}\b                                   # someone else's words
    | \b(?:according\s+to|apparently|rumour\s+has\s+it|heard\s+that|read\s+that)\b
    """,
    re.VERBOSE,
)
_ONE_OFF = re.compile(
    r"""
    \b(?:this\s+time|just\s+this\s+once|this\s+once|for\s+now|for\s+the\s+moment|right\s+now
        |at\s+the\s+moment|today|tonight|for\s+today|this\s+week|lately)\b
    | \b(?:for|in)\s+(?:this|that|the\s+next|your\s+next)\s+
        (?:reply|answer|response|message|one|draft|email|post|paragraph|section|page
        |version|turn|request|task|sentence|list)\b
    | \b(?:reply|answer|response)\s+only\b
    """,
    re.VERBOSE,
)
# A change relative to what is on screen ("bigger", "a bit more") edits today's draft.
_COMPARATIVE = re.compile(
    r"""\b(?:bigger|smaller|larger|darker|lighter|brighter|shorter|longer|wider|narrower
    |bolder|simpler|cleaner|clearer|louder|softer|warmer|cooler|higher|lower|tighter
    |punchier|friendlier|quieter|calmer|(?:a\s+(?:bit|little|lot)\s+)(?:more|less))\b""",
    re.VERBOSE,
)
# "you always ...", "I never ..." describe a habit of the assistant or of the user; they
# instruct nothing unless the verb says what is wanted ("I always want a summary").
_HABIT = re.compile(
    r"""^(?:i|you)\s+(?:always|never|usually|often|sometimes)\s+
    (?!(?:want|need|like|prefer|love|expect|require|hate|dislike|have\s+to|must|should)\b)""",
    re.VERBOSE,
)
# "it", "this one": the thing on screen; not "this conversation", nor "make sure that".
_DEICTIC = re.compile(
    r"\b(?:it|them)\b|(?<!sure\s)(?<!so\s)\b(?:this|that|these|those)\b"
    r"(?!\s+(?:conversation|thread|chat)\b)"
)
_DECIDED = re.compile(
    r"""
    (?:^|\b(?:we|i|we\s+have|i\s+have|the\s+team|our\s+team|team)\s+
        (?:(?:finally|now|just|already|eventually|all|both)\s+)?)
    (?:decided|agreed|chose|chosen|settled\s+on|went\s+with|gone\s+with|opted\s+for
        |picked|switched|moved\s+\w+(?:\s+\w+)?\s+to|dropped|replaced|ditched|approved
        |signed\s+off\s+on|committed\s+to|locked\s+in|are\s+going\s+with)\b
    | (?<!\bis\s)(?<!\bare\s)(?<!\bbe\s)(?<!\bbeen\s)\b(?:decided|approved|agreed\s+(?:on|to)
        |signed\s+off\s+on|settled\s+on|opted\s+for)\b  # only ever a decision
    | \b(?:it\s+is\s+decided|final\s+decision|decision\s+is|we\s+have\s+a\s+decision)\b
    | ^let\s+us\s+go\s+with\b
    """,
    re.VERBOSE,
)
_UNDECIDED = re.compile(
    r"\b(?:not|never|yet\s+to|still)\s+(?:\w+\s+)?(?:decided|decide|deciding|agreed|chosen)\b"
    r"|\bundecided\b"
)
_PAST_VERB = (
    r"(?:was|were|had|did|got|went|came|heard|took|made|saw|sent|thought|felt|ran|told|said"
    r"|left|lost|found|gave|knew|began|wrote|spoke|bought|sold|paid|met|broke|forgot"
    r"|used\s+to|[a-z]{2,}(?<!e)ed)"
)
_PAST_EVENT = re.compile(
    rf"""
    \b(?:i|we|they|he|she|it|you)\s+(?:(?:never|always|just|also|only|really|once|even
        |actually)\s+)?{_PAST_VERB}\b                     # something that happened
    | \b(?:yesterday|ago|the\s+other\s+day|earlier\s+today|this\s+morning|back\s+then
        |back\s+in|in\s+the\s+past|previously|when\s+(?:i|we)\s+(?:was|were)
        |last\s+(?:night|week|month|year|time|summer|winter|spring|autumn|fall|monday
        |tuesday|wednesday|thursday|friday|saturday|sunday))\b
        .*\b(?<!\bis\s)(?<!\bare\s){_PAST_VERB}\b
    | \b(?:always|never|usually|often)\s+{_PAST_VERB}\b      # a habit that was
    | \b{_PAST_VERB}\b.*\b(?:yesterday|ago|the\s+other\s+day|last\s+(?:night|week|month
        |year|time))\b
    """,
    re.VERBOSE,
)
_FORBIDDING = re.compile(
    r"""
    ^(?:please\s+)?(?:never|do\s+not|avoid|refrain\s+from|no\s+more|quit\s+\w+ing
        |stop\s+\w+ing|stop\s+(?:with|any)|ban|do\s+without)\b
    | ^no\s+(?!more\b)(?=\w)                             # "no emojis in headlines"
    | \b(?:should|must|will|can|we|i|you)\s+(?:not\s+ever|never|not)\b
        (?!\s+(?:forget|fail|miss|need|have\s+to|be\s+afraid)\b)
    | \b(?:i|we)\s+(?:hate|dislike|can\s+not\s+stand|do\s+not\s+(?:want|like|do|use|allow
        |offer|sell|ship|accept))\b
    | \b(?:is|are)\s+(?:off[\s-]limits|banned|forbidden|not\s+allowed|a\s+no[\s-]go)\b
    """,
    re.VERBOSE,
)
# "never forget to ..." is a rule to follow; "no more than three" is a limit, not a ban.
_NOT_FORBIDDING = re.compile(
    r"^(?:please\s+)?(?:never|do\s+not)\s+(?:forget|fail|miss)\b"
    r"|^no\s+(?:more|less|fewer|longer|shorter)\s+than\b"
)
_IMPERATIVE_DONT = re.compile(r"^(?:please\s+)?do\s+not\b")
_STRONG_MARKER = re.compile(
    r"""
    \b(?:always|never|from\s+now\s+on|from\s+here\s+on|going\s+forward|moving\s+forward
        |in\s+(?:the\s+)?future|for\s+all\s+future|by\s+default|as\s+a\s+rule
        |in\s+general|every\s+time|each\s+time|any\s+time|anytime|whenever|every\s+single
        |at\s+all\s+times|keep\s+doing|(?:not|never)\s+ever)\b
    | ,\s*ever\b
    | \b(?:in|for)\s+(?:the\s+rest\s+of\s+)?this\s+(?:conversation|thread|chat)\b  # its scope
    """,
    re.VERBOSE,
)
_WIDE_MARKER = re.compile(
    r"""
    \b(?:every|each|all|everywhere|throughout|anywhere|across\s+the\s+(?:site|board|brand)
        |stick\s+(?:to|with)|default\s+to|make\s+sure\s+(?:to|that|you)
        |no\s+(?:more|less|fewer|longer|shorter)\s+than|at\s+(?:most|least))\b
    | ^when\s+(?:you|we)\s+\w+[^,]*,                       # "when you write X, do Y"
    """,
    re.VERBOSE,
)
_LIKING = re.compile(
    rf"""
    \b(?:i|we)\s+{_ADVERB}(?:would\s+)?{_ADVERB}(?:prefer|rather|like|love|adore|want|always\s+want|favour
        |favor)\b(?!\s+(?:it|that|this|them|those|these|to|you)\b)
    | \b(?:i|we)\s+am\s+a\s+(?:big\s+|huge\s+)?fan\s+of\b
    | \b(?:i|we)\s+are\s+(?:big\s+|huge\s+)?fans\s+of\b
    | \b(?:my|our)\s+(?:favourite|favorite|preferred|go-to)\b
    """,
    re.VERBOSE,
)
_NORM = re.compile(
    r"""
    ^(?:[\w'-]+\s+){1,5}?
    (?<!\bi\s)(?<!\bwe\s)(?<!\byou\s)(?<!\bit\s)(?<!\bthey\s)(?<!\bthis\s)(?<!\bthat\s)
    (?:should|must|needs?\s+to|has\s+to|have\s+to|needs)\b   # a norm, not "we should"
    """,
    re.VERBOSE,
)
_BRAND = re.compile(
    rf"""
    \b(?:tone|tones|voice|audience|audiences|brand|branding|persona|personality|register
        |sector|industry|niche|formal|informal|formally|informally|second\s+person
        |first\s+person|third\s+person)\b
    | \b(?:we|i)\s+{_ADVERB}(?:write|speak|talk|sell)\s+(?:for|to)\b
    | \b(?:aimed|targeted)\s+at\b|\btarget\s+(?:market|customers?|readers?)\b
    | \bour\s+(?:customers|readers|clients|buyers)\s+are\b
    | \baddress\s+(?:readers|customers|people|users|clients)\b
    """,
    re.VERBOSE,
)
_BUSINESS_FACT = re.compile(
    rf"""
    ^(?:(?:we|i)\s+{_ADVERB}
            (?:sell|make|ship|offer|run|own|manage|serve|work|operate|use|employ|stock
            |write|speak|talk
            |produce|deliver|specialise|specialize|focus|open|close|have\s+(?:about|around
            |over|under|\d+|a|an|two|three|four|five|ten)|are\s+(?:a|an|based|located
            |closed|open|only)|am\s+(?:a|an)\s+(?!bit\b|little\b|lot\b))\b
        | we\s+are\s+(?:launching|opening|moving|closing|releasing|rebranding|relaunching)\b
        | (?:our|my\s+(?:name|business|company|shop|store|brand|studio|website|site)
            |the\s+(?:business|company|shop|store|brand|studio|bakery|website|site|team
            |owner|founder))\s+(?:[\w'&-]+\s+){{0,3}}?(?:is|are|opens|closes|has|have|runs
            |starts|ships|sells|includes|costs|lasts|comes)\b
        | (?:everything|all|most|some)\s+(?:of\s+)?(?:we|our)\b
        )
    """,
    re.VERBOSE,
)
# A leading setting ("when you ...,", "on every page,") comes before the instruction.
_SETTING = re.compile(
    r"^(?:when|whenever|if|once|after|before|for|in|on|at|across|with|by|as|every|each|any)\b"
)
_LIMIT = re.compile(r"^no\s+(?:more|less|fewer|longer|shorter)\s+than\b")
# Words a sentence in the imperative cannot open with: it states, asks or greets instead.
_NOT_A_VERB = re.compile(
    r"""^(?:i|you|we|they|he|she|it|this|that|these|those|there|here|the|a|an|my|our|your
    |their|its|his|her|for|in|on|at|with|by|from|to|of|about|after|before|as|so|and|but|or
    |if|yes|yeah|no|not|wow|haha|lol|oh|thanks|thank|what|is|are|was|were|am|everyone
    |everything|nothing|something|someone|nobody)\b""",
    re.VERBOSE,
)


def _reading(body: str) -> tuple[Category, float] | None:
    """The category and confidence of a sentence's body, or None if it is not a rule."""
    if _QUESTION.search(body) or _HYPOTHETICAL.search(body) or _REPORTED.search(body):
        return None
    if _HABIT.search(body):
        return None
    if _DECIDED.search(body) and not _UNDECIDED.search(body):
        return Category.HISTORY, _STATED
    if _ONE_OFF.search(body) or _PAST_EVENT.search(body):
        return None
    main = _main_clause(body)
    strong = bool(_STRONG_MARKER.search(body))
    # "this", "it" in the clause that gives the instruction point at today's draft, and so
    # does a comparative, unless a durable marker says otherwise.
    pointed = bool(_DEICTIC.search(main.split(",")[0])) or (
        not strong and bool(_COMPARATIVE.search(body))
    )
    liking = bool(_LIKING.search(body))
    norm = bool(_NORM.search(body))
    evidence: list[tuple[Category | None, float]] = []
    if _FORBIDDING.search(body) and not _NOT_FORBIDDING.search(body):
        plain_dont = bool(_IMPERATIVE_DONT.search(body)) and not strong
        if not (plain_dont and pointed):
            evidence.append((Category.FORBIDDEN, _PLAIN if plain_dont else _STATED))
    if strong:
        evidence.append((None, _STRONG))
    if liking and not pointed:
        evidence.append((None, _STATED))
    wide = _WIDE_MARKER.search(body) and (
        liking or norm or _LIMIT.match(main) or not _NOT_A_VERB.match(main)
    )
    if (wide or norm) and not pointed:
        evidence.append((None, _PLAIN))
    brand = _BRAND.search(body)
    if _BUSINESS_FACT.search(body):
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
    if _SETTING.match(body) and "," in body:
        return body.split(",", 1)[1].strip()
    return body


def _category_of_content(body: str) -> Category:
    """The category of something the user asked to keep without saying what kind it is."""
    if _DECIDED.search(body):
        return Category.HISTORY
    if _FORBIDDING.search(body) and not _NOT_FORBIDDING.search(body):
        return Category.FORBIDDEN
    if _BRAND.search(body):
        return Category.BRAND
    if _LIKING.search(body) or _STRONG_MARKER.search(body):
        return Category.PREFERENCES
    return Category.CONTEXT


def _body(stated: str) -> tuple[str, bool]:
    """The sentence as the rules read it, and whether it asked to be remembered.

    Lower case, contractions spelled out, idioms that borrow rule words ("never mind")
    and openers that state nothing ("ok so", "thanks") removed.
    """
    text = _folded(stated)
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = _IDIOMS.sub(" ", text)
    flagged = False
    while True:
        before = text
        text = _OPENER.sub("", text)
        if lead_in := _LEAD_IN.match(text):
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
