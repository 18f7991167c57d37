"""What a DynamoDB number can hold, checked before any number a client sends is stored:
a number DynamoDB refuses fails the write, which would be a 500 for what a client sent."""

from __future__ import annotations

from decimal import Decimal
import math

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
