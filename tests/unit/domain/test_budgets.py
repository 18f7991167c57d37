"""Budgets as a rule: at the limit is over it, a month's limit is named before a day's,
and each period resets at the next UTC midnight."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recall.domain.usage import Budget, Counts, MemberUsage, over_budget, resets_at

NOW = datetime(2026, 11, 30, 15, 30, tzinfo=UTC)


def used(
    day_turns: int = 0,
    day_tokens: int = 0,
    month_turns: int = 0,
    month_tokens: int = 0,
    day: str = "2026-11-30",
    month: str = "2026-11",
) -> MemberUsage:
    return MemberUsage(
        month=month,
        month_counts=Counts(input_tokens=month_tokens, turns=month_turns),
        day=day,
        day_counts=Counts(output_tokens=day_tokens, turns=day_turns),
    )


def test_no_budget_never_refuses() -> None:
    assert over_budget(None, used(day_turns=10**9), NOW) is None
    assert over_budget(Budget(), used(day_turns=10**9), NOW) is None


@pytest.mark.parametrize(("turns", "refused"), [(2, False), (3, True), (4, True)])
def test_a_daily_turn_budget_refuses_at_exactly_the_limit(turns: int, refused: bool) -> None:
    refusal = over_budget(Budget(turns_per_day=3), used(day_turns=turns), NOW)
    assert (refusal is not None) is refused


@pytest.mark.parametrize(("tokens", "refused"), [(999, False), (1000, True)])
def test_a_monthly_token_budget_counts_every_token(tokens: int, refused: bool) -> None:
    usage = MemberUsage(
        month="2026-11",
        month_counts=Counts(
            input_tokens=tokens - 3, output_tokens=1, cache_read_tokens=1, cache_write_tokens=1
        ),
    )
    refusal = over_budget(Budget(tokens_per_month=1000), usage, NOW)
    assert (refusal is not None) is refused


def test_yesterdays_turns_do_not_count_today() -> None:
    assert over_budget(Budget(turns_per_day=3), used(day_turns=3, day="2026-11-29"), NOW) is None


def test_last_months_counters_do_not_count_this_month() -> None:
    stale = used(month_turns=50, month="2026-10", day="2026-10-31")
    assert over_budget(Budget(turns_per_month=50), stale, NOW) is None


def test_a_months_limit_is_named_first_and_lifts_on_the_first_of_next_month() -> None:
    budget = Budget(turns_per_day=1, turns_per_month=1)
    refusal = over_budget(budget, used(day_turns=1, month_turns=1), NOW)
    assert refusal is not None
    assert (refusal.limit, refusal.used, refusal.budget) == ("turnsPerMonth", 1, 1)
    assert refusal.resets_at == datetime(2026, 12, 1, tzinfo=UTC)


def test_periods_reset_at_the_next_utc_midnight_even_across_a_year() -> None:
    late = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert resets_at("day", late) == datetime(2027, 1, 1, tzinfo=UTC)
    assert resets_at("month", late) == datetime(2027, 1, 1, tzinfo=UTC)
    assert resets_at("month", datetime(2027, 1, 31, tzinfo=UTC)) == datetime(2027, 2, 1, tzinfo=UTC)
    assert resets_at("day", datetime(2028, 2, 28, 12, tzinfo=UTC)) == datetime(
        2028, 2, 29, tzinfo=UTC
    )
