"""How many bytes DynamoDB counts for a value, so what grows with client input or model
output can be trimmed to fit its item (400 KB) before a request is refused, not after.

DynamoDB's rules: a string is its UTF-8 bytes, a number 1 byte per two significant digits
plus 1, a boolean or null 1, a list or map 3 bytes plus 1 byte per element plus its
elements (a map's element also its name's bytes); an item is the sum of its attributes'
names and values. Pure: plain values in, bytes out."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

ITEM_MAX_BYTES = 400 * 1024


def _number_size(value: int | float | Decimal) -> int:
    digits = Decimal(str(value)).as_tuple().digits
    significant = len("".join(map(str, digits)).strip("0")) or 1
    return (significant + 1) // 2 + 1


def stored_size(value: Any) -> int:
    """The bytes DynamoDB counts for one value, as the codec would store it."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, int | float | Decimal):
        return _number_size(value)
    if isinstance(value, Mapping):
        return 3 + sum(
            stored_size(str(name)) + stored_size(part) + 1 for name, part in value.items()
        )
    if isinstance(value, list | tuple | set | frozenset):
        return 3 + sum(stored_size(part) + 1 for part in value)
    raise TypeError(f"no DynamoDB size for {type(value).__name__}")


def item_size(attributes: Mapping[str, Any]) -> int:
    """An item's size: each attribute's name and value; ``None`` values are not stored."""
    return sum(
        stored_size(name) + stored_size(value)
        for name, value in attributes.items()
        if value is not None
    )
