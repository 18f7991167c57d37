"""The item codec writes a number exactly or not at all: DynamoDB holds 38 significant
digits from 1e-130 to under 1e126, and a number past that is refused, never rounded."""

from __future__ import annotations

import pytest

from recall.store.dynamodb import UnstorableNumber, from_item, to_item

FORTY_TWO_DIGITS = 123456789012345678901234567890123456789012


@pytest.mark.parametrize(
    "number",
    [FORTY_TWO_DIGITS, -FORTY_TWO_DIGITS, 1.5e-200, 1e130, float("inf"), float("nan")],
    ids=["42-digits", "negative-42-digits", "too-small", "too-large", "infinite", "nan"],
)
def test_a_number_dynamodb_cannot_hold_is_refused_not_rounded(number: float) -> None:
    with pytest.raises(UnstorableNumber):
        to_item({"input": {"nested": [1, {"n": number}]}})


@pytest.mark.parametrize(
    "number",
    [10**40, 12345678901234567890123456789012345678 * 10**20, 10**37 + 1, 1e-130, 0.1],
    ids=["round-41-digits", "38-significant-then-zeros", "38-digits", "smallest", "fraction"],
)
def test_a_number_dynamodb_can_hold_comes_back_as_it_went(number: float) -> None:
    assert from_item(to_item({"n": number})) == {"n": number}
