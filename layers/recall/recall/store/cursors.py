"""Page cursors: opaque to clients (base64url JSON of the last key read), checked when they
come back, so a cursor edited, or issued for another list, is a 422 and never a request
DynamoDB refuses nor a page of another position."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from recall.domain.ids import is_id
from recall.errors import Invalid


def encode_cursor(values: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


CURSOR_VALUE_MAX_BYTES = 1_024


def _cursor_value(value: object) -> bool:
    """A value a start key can hold: text that is UTF-8 (no lone surrogate) and no longer
    than a sort key may be, so a tampered cursor is a 422 and never a request DynamoDB
    refuses."""
    if not isinstance(value, str) or not value:
        return False
    try:
        return len(value.encode("utf-8")) <= CURSOR_VALUE_MAX_BYTES
    except UnicodeEncodeError:
        return False


def not_this_cursor(reason: str = "not one this API issued") -> Invalid:
    """The 422 of a cursor that cannot resume the list it was given to."""
    return Invalid(
        "The cursor is not one this API issued for this list; start again without it.",
        [{"field": "cursor", "message": reason}],
    )


def list_tag(*parts: str) -> str:
    """Which list a cursor was issued for (its owner, its thread or entry, live or archived),
    without saying it: a short hash, checked when the cursor comes back, so one of another
    user's or project's list never pages this one by position."""
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def position_in(cursor: str, scope: tuple[str, str], at: str, what: str) -> str:
    """The id a page cursor resumes before, within one scope only (``scope``: the field
    naming it and its value, such as a thread or a memory entry; ``what`` names it in
    words): one of another scope, or edited into something no id is, is a 422, never a
    page of another position."""
    field, value = scope
    start = decode_cursor(cursor, {field, at})
    if start[field] != value:
        raise not_this_cursor(f"from another {what}")
    if not is_id(start[at]):
        raise not_this_cursor(f"not a position in this {what}")
    return start[at]


def decode_cursor(cursor: str, fields: set[str]) -> dict[str, str]:
    """An opaque cursor back to its values; anything a client tampered with is a 422."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError) as exc:
        raise not_this_cursor() from exc
    if (
        not isinstance(values, dict)
        or set(values) != fields
        or not all(_cursor_value(v) for v in values.values())
    ):
        raise not_this_cursor()
    return values
