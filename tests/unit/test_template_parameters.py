"""What the template's parameters accept: a value CloudFormation takes must mean what the
local server makes of it."""

from __future__ import annotations

import re

from local import template


def test_cors_origins_with_a_space_are_refused_at_deploy() -> None:
    # Given the template's pattern for the origins it splits on commas alone
    parameter = template.load()["Parameters"]["CorsAllowedOrigins"]
    pattern = re.compile(parameter["AllowedPattern"])
    # Then
    assert pattern.fullmatch("https://a.example,https://b.example")
    assert pattern.fullmatch("")
    assert not pattern.fullmatch("https://a.example, https://b.example")
