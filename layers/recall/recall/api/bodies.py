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
