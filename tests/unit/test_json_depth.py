"""How deeply a request body nests is measured in one pass, whatever the body: the check
runs before routing and before any role check, so it must never cost more than reading."""

from __future__ import annotations

import time

import pytest

from recall.api.bodies import json_depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ('{"a": [1, {"b": "]]]"}]}', 3),
        ('["\\"[[[", [[]]]', 3),
        ('"never closes [[[', 0),
        ('[[ "ends in a backslash \\', 2),
        ('{"line": "a\\\nb", "x": [[]]}', 3),
    ],
)
def test_brackets_inside_strings_do_not_count(text: str, depth: int) -> None:
    assert json_depth(text) == depth


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        json_depth(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("tail", ["", "\\"], ids=["unclosed", "unclosed-ending-in-a-backslash"])
def test_an_unclosed_string_of_escaped_quotes_costs_what_its_length_does(tail: str) -> None:
    # Given a string that never closes, made of escaped quotes, at two sizes (a ratio in one
    # run, not a time: a quadratic scan takes 16 times as long for 4 times the text)
    small, large = ('"' + '\\"' * n + tail for n in (4_000, 16_000))
    # When / Then
    assert _seconds(large) < 8 * _seconds(small) + 0.005
