"""What a DynamoDB number can hold, checked before any number a client sends is stored:
a number DynamoDB refuses fails the write, which would be a 500 for what a client sent."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
import json
import math
from typing import Any

# What a DynamoDB number can hold: 38 significant digits, magnitude 1E-130 to under 1E+126.
NUMBER_MAX_DIGITS = 38
NUMBER_MIN_EXPONENT = -130
NUMBER_MAX_EXPONENT = 125
# What a fraction (a temperature, a confidence) may be, in the words a 422 uses.
FRACTION_RANGE = "0, or from 1e-130 to 1"


def storable_number(value: int | float) -> bool:
    """Whether DynamoDB can store ``value`` exactly as sent: finite, at most 38 significant
    digits, zero or of magnitude 1E-130 to under 1E+126. Anything else would fail the
    write (a 500), so it is refused before the store sees it."""
    if isinstance(value, bool):
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return False
    number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    if number.is_zero():
        return True
    significant = "".join(map(str, number.as_tuple().digits)).strip("0")
    return (
        len(significant) <= NUMBER_MAX_DIGITS
        and NUMBER_MIN_EXPONENT <= number.adjusted() <= NUMBER_MAX_EXPONENT
    )


# What a 422 says of a number DynamoDB cannot hold.
NUMBER_RANGE = (
    "a finite number of at most 38 significant digits, zero or of magnitude 1e-130 to under 1e126"
)


def unstorable_numbers(value: Any, path: str) -> Iterator[str]:
    """Where, under ``path`` (``a.0.b``), a JSON value holds a number DynamoDB cannot:
    what a client sends inside free-form JSON (a tool call's input) is checked whole, and
    each such number named, before anything is stored."""
    if isinstance(value, int | float) and not storable_number(value):
        yield path
    elif isinstance(value, list):
        for index, part in enumerate(value):
            yield from unstorable_numbers(part, f"{path}.{index}")
    elif isinstance(value, dict):
        for name, part in value.items():
            yield from unstorable_numbers(part, f"{path}.{name}")


def with_storable_numbers(value: Any) -> Any:
    """``value`` with every number DynamoDB cannot hold kept as its JSON text instead: what
    a model put in a tool call's input is not the client's to correct, and the turn saves
    it rather than fail (``1.5e-200`` becomes ``"1.5e-200"``)."""
    if isinstance(value, int | float) and not storable_number(value):
        return json.dumps(value)
    if isinstance(value, list):
        return [with_storable_numbers(part) for part in value]
    if isinstance(value, dict):
        return {name: with_storable_numbers(part) for name, part in value.items()}
    return value
