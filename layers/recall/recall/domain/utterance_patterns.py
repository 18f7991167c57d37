"""The shapes of an utterance that decide whether it states a standing rule: questions,
hypotheticals, reported speech, past events and one-off requests say no; durable markers,
forbidding words, decisions and business facts say yes. Pure patterns, read by
``memory_proposals``."""

from __future__ import annotations

import re
from typing import Final

SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
WORD = re.compile(r"[a-z0-9]+")
THREAD_SCOPE = re.compile(r"\b(?:in|for) (?:the rest of )?this (?:conversation|thread|chat)\b")

# Lead-ins that ask for the rest to be kept; stripped from the value, they raise confidence.
REMEMBER = (
    r"(?:please\s+)?(?:remember|keep in mind|bear in mind|note|do not forget|don['’]t forget)"
    r"(?:\s+that\b|\s*[:,]|\s+(?=our\b|we\b|my\b|i\b))"
    r"|just so you know|so you know|fyi|for the record|for future reference|for reference"
    r"|for context|quick note|one more thing|note to self"
)
LEAD_IN = re.compile(rf"^(?:{REMEMBER})[\s,:;-]*", re.IGNORECASE)
# Words that open a sentence without being part of what it states.
OPENER = re.compile(
    r"^(?:(?:ok|okay|alright|right|so|also|and|oh|btw|by the way|hey|hi|hello|please|pls"
    r"|love it|great|perfect|thanks|thank you|cool|nice|well|anyway|honestly|frankly"
    r"|to be honest|tbh|actually|haha|lol)\b[\s,:;!-]*)+"
)
IDIOMS = re.compile(
    r"\b(?:never mind|nevermind|do not worry|do not bother|do not mind|no worries|no problem"
    r"|no thanks|no thank you|no idea|no way|do not get me wrong|never heard of|all good"
    r"|never say never|better late than never"
    r"|all set|all done)\b"
)

CONTRACTIONS: Final = (
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
ADVERB = (
    r"(?:(?:really|much|generally|usually|definitely|strongly|honestly|also|still|mostly"
    r"|mainly|only|just|actually)\s+)?"
)
SUBJECT = r"(?:i|you|we|they|he|she|it|this|that|these|those|there|the|my|our|your|their|anyone|anybody|someone|everyone)"  # noqa: E501
AUXILIARY = r"(?:do|does|did|is|are|was|were|am|can|could|would|will|shall|should|have|has|had|may|might|must)"  # noqa: E501
QUESTION = re.compile(
    rf"""
    \?\s*$                                               # a question mark
    | ^(?:why|who|whom|whose|which|what)\b               # an interrogative opening
    | ^(?:how|when|where)\s+{AUXILIARY}\b
    | ^{AUXILIARY}(?:\s+not)?\s+{SUBJECT}\b            # an inverted auxiliary
    | ^(?:any\s+idea|anyone\s+know|tell\s+(?:me|us)\s+(?:why|how|what|if|whether|about))\b
    | \b(?:i\s+wonder|i\s+am\s+wondering|i\s+was\s+wondering|wondering\s+(?:if|whether)
        |curious\s+(?:if|whether|why|how)|not\s+sure\s+(?:if|whether))\b
    """,
    re.VERBOSE,
)
HYPOTHETICAL = re.compile(
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
REPORTING = (
    r"(?:said|says|say|saying|told|tells|mentioned|mentions|suggested|suggests|thinks|thought"
    r"|believes|reckons|claims|claimed|insists|insisted|argued|argues|recommended|recommends"
    r"|wants|wanted|asked|asks|keeps\s+saying|kept\s+saying)"
)
REPORTED = re.compile(
    rf"""
    \b(?!(?:i|we|always|also|just|apparently|really|once|even|never|not|to|please|should
        |must|would|will|can|could|do|and|or)\b)\w+\s+   # a speaker, not "never say"
        (?:(?:always|also|just|apparently|really|once|even)\s+)?
        {REPORTING}\b                                   # someone else's words
    | \b(?:according\s+to|apparently|rumour\s+has\s+it|heard\s+that|read\s+that)\b
    """,
    re.VERBOSE,
)
ONE_OFF = re.compile(
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
COMPARATIVE = re.compile(
    r"""\b(?:bigger|smaller|larger|darker|lighter|brighter|shorter|longer|wider|narrower
    |bolder|simpler|cleaner|clearer|louder|softer|warmer|cooler|higher|lower|tighter
    |punchier|friendlier|quieter|calmer|(?:a\s+(?:bit|little|lot)\s+)(?:more|less))\b""",
    re.VERBOSE,
)
# "you always ...", "I never ..." describe a habit of the assistant or of the user; they
# instruct nothing unless the verb says what is wanted ("I always want a summary").
HABIT = re.compile(
    r"""^(?:i|you)\s+(?:always|never|usually|often|sometimes)\s+
    (?!(?:want|need|like|prefer|love|expect|require|hate|dislike|have\s+to|must|should)\b)""",
    re.VERBOSE,
)
# "it", "this one": the thing on screen; not "this conversation", nor "make sure that".
DEICTIC = re.compile(
    r"\b(?:it|them)\b|(?<!sure\s)(?<!so\s)\b(?:this|that|these|those)\b"
    r"(?!\s+(?:conversation|thread|chat)\b)"
)
DECIDED = re.compile(
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
UNDECIDED = re.compile(
    r"\b(?:not|never|yet\s+to|still)\s+(?:\w+\s+)?(?:decided|decide|deciding|agreed|chosen)\b"
    r"|\bundecided\b"
)
PAST_VERB = (
    r"(?:was|were|had|did|got|went|came|heard|took|made|saw|sent|thought|felt|ran|told|said"
    r"|left|lost|found|gave|knew|began|wrote|spoke|bought|sold|paid|met|broke|forgot"
    r"|used\s+to|[a-z]{2,}(?<!e)ed)"
)
PAST_EVENT = re.compile(
    rf"""
    \b(?:i|we|they|he|she|it|you)\s+(?:(?:never|always|just|also|only|really|once|even
        |actually)\s+)?{PAST_VERB}\b                     # something that happened
    | \b(?:yesterday|ago|the\s+other\s+day|earlier\s+today|this\s+morning|back\s+then
        |back\s+in|in\s+the\s+past|previously|when\s+(?:i|we)\s+(?:was|were)
        |last\s+(?:night|week|month|year|time|summer|winter|spring|autumn|fall|monday
        |tuesday|wednesday|thursday|friday|saturday|sunday))\b
        .*\b(?<!\bis\s)(?<!\bare\s){PAST_VERB}\b
    | \b(?:always|never|usually|often)\s+{PAST_VERB}\b      # a habit that was
    | \b{PAST_VERB}\b.*\b(?:yesterday|ago|the\s+other\s+day|last\s+(?:night|week|month
        |year|time))\b
    """,
    re.VERBOSE,
)
FORBIDDING = re.compile(
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
NOT_FORBIDDING = re.compile(
    r"^(?:please\s+)?(?:never|do\s+not)\s+(?:forget|fail|miss)\b"
    r"|^no\s+(?:more|less|fewer|longer|shorter)\s+than\b"
)
IMPERATIVE_DONT = re.compile(r"^(?:please\s+)?do\s+not\b")
STRONG_MARKER = re.compile(
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
WIDE_MARKER = re.compile(
    r"""
    \b(?:every|each|all|everywhere|throughout|anywhere|across\s+the\s+(?:site|board|brand)
        |stick\s+(?:to|with)|default\s+to|make\s+sure\s+(?:to|that|you)
        |no\s+(?:more|less|fewer|longer|shorter)\s+than|at\s+(?:most|least))\b
    | ^when\s+(?:you|we)\s+\w+[^,]*,                       # "when you write X, do Y"
    """,
    re.VERBOSE,
)
LIKING = re.compile(
    rf"""
    \b(?:i|we)\s+{ADVERB}(?:would\s+)?{ADVERB}(?:prefer|rather|like|love|adore|want|always\s+want|favour
        |favor)\b(?!\s+(?:it|that|this|them|those|these|to|you)\b)
    | \b(?:i|we)\s+am\s+a\s+(?:big\s+|huge\s+)?fan\s+of\b
    | \b(?:i|we)\s+are\s+(?:big\s+|huge\s+)?fans\s+of\b
    | \b(?:my|our)\s+(?:favourite|favorite|preferred|go-to)\b
    """,
    re.VERBOSE,
)
NORM = re.compile(
    r"""
    ^(?:[\w'-]+\s+){1,5}?
    (?<!\bi\s)(?<!\bwe\s)(?<!\byou\s)(?<!\bit\s)(?<!\bthey\s)(?<!\bthis\s)(?<!\bthat\s)
    (?:should|must|needs?\s+to|has\s+to|have\s+to|needs)\b   # a norm, not "we should"
    """,
    re.VERBOSE,
)
BRAND = re.compile(
    rf"""
    \b(?:tone|tones|voice|audience|audiences|brand|branding|persona|personality|register
        |sector|industry|niche|formal|informal|formally|informally|second\s+person
        |first\s+person|third\s+person)\b
    | \b(?:we|i)\s+{ADVERB}(?:write|speak|talk|sell)\s+(?:for|to)\b
    | \b(?:aimed|targeted)\s+at\b|\btarget\s+(?:market|customers?|readers?)\b
    | \bour\s+(?:customers|readers|clients|buyers)\s+are\b
    | \baddress\s+(?:readers|customers|people|users|clients)\b
    """,
    re.VERBOSE,
)
BUSINESS_FACT = re.compile(
    rf"""
    ^(?:(?:we|i)\s+{ADVERB}
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
SETTING = re.compile(
    r"^(?:when|whenever|if|once|after|before|for|in|on|at|across|with|by|as|every|each|any)\b"
)
LIMIT = re.compile(r"^no\s+(?:more|less|fewer|longer|shorter)\s+than\b")
# Words a sentence in the imperative cannot open with: it states, asks or greets instead.
NOT_A_VERB = re.compile(
    r"""^(?:i|you|we|they|he|she|it|this|that|these|those|there|here|the|a|an|my|our|your
    |their|its|his|her|for|in|on|at|with|by|from|to|of|about|after|before|as|so|and|but|or
    |if|yes|yeah|no|not|wow|haha|lol|oh|thanks|thank|what|is|are|was|were|am|everyone
    |everything|nothing|something|someone|nobody)\b""",
    re.VERBOSE,
)
