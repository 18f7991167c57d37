"""What a client sends as JSON, read strictly and measured before anything parses it, over
HTTP and over the WebSocket API alike."""

from __future__ import annotations

from itertools import accumulate
import json
import re
from typing import Any

MAX_JSON_DEPTH = 32
# A string to its closing quote, or to the end of the text when it never closes: an
# unclosed string must still be one match, or every escaped quote inside it starts a new
# scan to the end, and a body of 80 KB took 20 s.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\[\s\S])*(?:"|\\?\Z)')
_NOT_BRACKET = re.compile(r"[^\[\]{}]")
# A string (as above) or one of JSON's structural characters; numbers and literals are
# skipped between them.
_TOKEN = re.compile(_JSON_STRING.pattern + r"|[\[\]{}:,]")


def json_bytes(value: object) -> int:
    """The bytes ``value`` takes written as JSON in an invocation payload, which Lambda
    counts against its 6 MB: UTF-8, with each quote and backslash in a string escaped (two
    bytes) and each control character too (up to six)."""
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def size_in_event(body: str) -> int:
    """The bytes ``body`` takes in the API Gateway event, where it is a JSON string (its
    two quotes left out), so a body of 5.3 MB of quotes is 10.5 MB."""
    return json_bytes(body) - 2


def json_depth(text: str) -> int:
    """How deeply ``text``'s arrays and objects nest, without a recursive parser: strings
    are dropped, then the brackets left are counted, so a body 10,000 levels deep is
    measured, not parsed."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    steps = (1 if char in "[{" else -1 for char in brackets)
    return max(accumulate(steps, initial=0))


def top_level_string(text: str, name: str) -> str | None:
    """The string value of member ``name`` of the object ``text`` holds, read from its top
    level alone: what is nested is skipped unparsed, so a text too deep, or holding a
    number too large, to parse still names it. The last one when it is named twice, as
    `read_json` keeps; None when it is absent, not a string, or ``text`` is no object."""
    depth, last, member, found = 0, "", None, None
    for match in _TOKEN.finditer(text):
        part = match[0]
        if depth == 0 and part != "{":
            break
        if depth == 1:
            if member is not None:  # the token after the member's colon starts its value
                found = _string(part) if member == name else found
                member = None
            elif part == ":":
                member = _string(last)
            last = part
        depth += (part in "[{") - (part in "]}") if len(part) == 1 else 0
        if depth == 0:
            break
    return found


def _string(part: str) -> str | None:
    try:
        value = json.loads(part) if part.startswith('"') else None
    except ValueError:  # a string that never closes, or an escape JSON has no place for
        return None
    return value if isinstance(value, str) else None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON.")


def read_json(text: str | bytes) -> Any:
    """A client's JSON, or `json.JSONDecodeError` for anything that is not JSON, the one
    error Powertools turns into a 400: Python's own parser raises a plain `ValueError` for
    an integer over 4,300 digits (a 500 once it reached the resolver's last resort), and
    reads ``NaN``, ``Infinity`` and ``-Infinity``, which RFC 8259 has no place for."""
    try:
        return json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc), str(text), 0) from exc
