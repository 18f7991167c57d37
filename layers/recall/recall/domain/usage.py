"""What a member spends on the model, by UTC day and month, and the budgets that cap it.

A turn is counted when it saves, in its own transaction, so the counters are exactly the
sum of the turns' ``usage``. A budget is checked before the model is called, against what
the turn read beside its thread: at the limit is over it, so a budget of 3 turns a day
allows three. Turns running at the same moment each pass the check they read, so a
budget is a gate, not a reservation: concurrent turns may end a little past it, and are
counted, never lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel

from recall.domain import clock
from recall.domain.prompt import Usage
from recall.domain.sessions import SessionTally

Period = Literal["day", "month"]


@dataclass(frozen=True)
class Counts:
    """Tokens as the model billed them, turns (or a job's model calls), tool rounds and the
    models used."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    turns: int = 0
    tool_rounds: int = 0
    models: frozenset[str] = field(default_factory=frozenset)

    @property
    def total_tokens(self) -> int:
        """What a token budget counts: every token billed, cached or not."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            turns=self.turns + other.turns,
            tool_rounds=self.tool_rounds + other.tool_rounds,
            models=self.models | other.models,
        )

    @classmethod
    def of(cls, usage: Usage, model_id: str, turns: int = 1, tool_rounds: int = 0) -> Counts:
        return cls(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens,
            cache_write_tokens=usage.cache_write_input_tokens,
            turns=turns,
            tool_rounds=tool_rounds,
            models=frozenset({model_id}),
        )


@dataclass(frozen=True)
class MemberUsage:
    """A member's counters for one month, with those of the last day they used the model
    in it (``day``): the day's counters start again when a turn lands on a later day, and
    the finished day is kept apart. ``None`` ``day``: nothing counted this month yet."""

    month: str
    month_counts: Counts = Counts()
    day: str | None = None
    day_counts: Counts = Counts()
    # The member's current session as the month's item counts it, or, before this
    # month's first turn, as last month's did (``session_carried``).
    session: SessionTally | None = None
    session_carried: bool = False

    def on(self, day: str) -> Counts:
        return self.day_counts if self.day == day else Counts()


class Budget(BaseModel):
    """A member's limits; ``None`` is no limit."""

    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    turns_per_day: int | None = None
    turns_per_month: int | None = None

    def empty(self) -> bool:
        return all(value is None for value in self.model_dump().values())


def day_of(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def month_of(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m")


def month_before(moment: datetime) -> str:
    first = moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return month_of(first - timedelta(days=1))


def resets_at(period: Period, moment: datetime) -> datetime:
    """The UTC midnight that starts the next day or the next month."""
    at = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return at + timedelta(days=1)
    first = at.replace(day=1)
    return (first + timedelta(days=32)).replace(day=1)


@dataclass(frozen=True)
class Refusal:
    """Which limit a turn reached, and when it lifts."""

    limit: str
    used: int
    budget: int
    resets_at: datetime


def over_budget(budget: Budget | None, usage: MemberUsage, now: datetime) -> Refusal | None:
    """The limit that refuses a turn now, or ``None``. A month's limit is named before a
    day's: it lifts later, so its reset is the one worth waiting for."""
    if budget is None:
        return None
    month = usage.month_counts if usage.month == month_of(now) else Counts()
    day = usage.on(day_of(now))
    checks: list[tuple[str, int | None, int, Period]] = [
        ("tokensPerMonth", budget.tokens_per_month, month.total_tokens, "month"),
        ("turnsPerMonth", budget.turns_per_month, month.turns, "month"),
        ("tokensPerDay", budget.tokens_per_day, day.total_tokens, "day"),
        ("turnsPerDay", budget.turns_per_day, day.turns, "day"),
    ]
    for limit, allowed, used, period in checks:
        if allowed is not None and used >= allowed:
            return Refusal(limit, used, allowed, resets_at(period, now))
    return None


def refusal_message(refusal: Refusal) -> str:
    what = "token" if refusal.limit.startswith("tokens") else "turn"
    what += "" if refusal.budget == 1 else "s"
    per = "today" if refusal.limit.endswith("Day") else "this month"
    return (
        f"You have used your budget of {refusal.budget:,} {what} {per} in this project; "
        f"it resets at {clock.stamp(refusal.resets_at)}."
    )
