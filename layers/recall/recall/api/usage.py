"""Bodies of the usage and budget routes (camelCase on the wire, like the rest of the API)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, StrictInt

from recall.api.models import Body, BudgetView, View
from recall.domain import clock
from recall.domain.access import Role
from recall.domain.sessions import Session
from recall.domain.usage import Budget, Counts, Period

if TYPE_CHECKING:
    from recall.services.usage import UsageReport


class BudgetBody(Body):
    """Each limit a positive whole number (at most BUDGET_MAX), or null or absent for none;
    ``{}`` clears the budget."""

    tokens_per_day: StrictInt | None = Field(default=None, ge=1)
    tokens_per_month: StrictInt | None = Field(default=None, ge=1)
    turns_per_day: StrictInt | None = Field(default=None, ge=1)
    turns_per_month: StrictInt | None = Field(default=None, ge=1)

    def budget(self) -> Budget:
        return Budget(**self.model_dump())


class MemberBudgetView(View):
    user_id: str
    budget: BudgetView | None


class TokensView(View):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    total_tokens: int
    models: list[str]


class UsageTotalsView(TokensView):
    turns: int
    tool_rounds: int

    @classmethod
    def of(cls, counts: Counts) -> UsageTotalsView:
        return cls(**_tokens(counts), turns=counts.turns, tool_rounds=counts.tool_rounds)


class UpkeepTotalsView(TokensView):
    """A job's model calls; ``calls`` counts them."""

    calls: int

    @classmethod
    def of(cls, counts: Counts) -> UpkeepTotalsView:
        return cls(**_tokens(counts), calls=counts.turns)


def _tokens(counts: Counts) -> dict[str, object]:
    return {
        "input_tokens": counts.input_tokens,
        "output_tokens": counts.output_tokens,
        "cache_read_tokens": counts.cache_read_tokens,
        "cache_write_tokens": counts.cache_write_tokens,
        "total_tokens": counts.total_tokens,
        "models": sorted(counts.models),
    }


class RemainingView(View):
    """What the budget leaves in this period (null: no limit)."""

    tokens: int | None
    turns: int | None


class MemberUsageView(View):
    user_id: str
    role: Role
    usage: UsageTotalsView
    budget: BudgetView | None


class UpkeepView(View):
    total: UpkeepTotalsView
    jobs: dict[str, UpkeepTotalsView]


class UsageReportView(View):
    project_id: str
    user_id: str
    period: Period
    date: str
    resets_at: str | None = Field(description="None for an earlier period: it is over.")
    usage: UsageTotalsView
    budget: BudgetView | None
    remaining: RemainingView | None = Field(
        description="What the current budget leaves; None for an earlier period."
    )
    members: list[MemberUsageView] | None = Field(
        default=None, description="Every member's usage in the period: owners only."
    )
    upkeep: UpkeepView

    @classmethod
    def of(cls, project_id: str, user_id: str, report: UsageReport) -> UsageReportView:
        budget = report.budget
        tokens_limit = turns_limit = None
        if budget is not None:
            daily = report.period == "day"
            tokens_limit = budget.tokens_per_day if daily else budget.tokens_per_month
            turns_limit = budget.turns_per_day if daily else budget.turns_per_month
        counts = report.counts
        total = sum(report.jobs.values(), Counts())
        return cls(
            project_id=project_id,
            user_id=user_id,
            period=report.period,
            date=report.date,
            resets_at=clock.stamp(report.resets_at) if report.resets_at else None,
            usage=UsageTotalsView.of(counts),
            budget=BudgetView.of(budget),
            remaining=None
            if report.resets_at is None
            else RemainingView(
                tokens=None if tokens_limit is None else max(0, tokens_limit - counts.total_tokens),
                turns=None if turns_limit is None else max(0, turns_limit - counts.turns),
            ),
            members=None
            if report.members is None
            else [
                MemberUsageView(
                    user_id=spend.member.user_id,
                    role=spend.member.role,
                    usage=UsageTotalsView.of(spend.counts),
                    budget=BudgetView.of(spend.member.budget),
                )
                for spend in report.members
            ],
            upkeep=UpkeepView(
                total=UpkeepTotalsView.of(total),
                jobs={job: UpkeepTotalsView.of(counts) for job, counts in report.jobs.items()},
            ),
        )


class SessionView(View):
    """A session: the live one (``endedAt`` null) counts its turns so far."""

    started_at: str
    ended_at: str | None
    last_turn_at: str | None
    live: bool
    turns: int
    tokens: int

    @classmethod
    def of(cls, session: Session) -> SessionView:
        return cls.model_validate({**session.model_dump(), "live": session.live})


class SessionList(View):
    sessions: list[SessionView]
    next_cursor: str | None = None
