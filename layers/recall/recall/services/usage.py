"""Usage reports and budgets: any member reads their own usage and the project's memory
upkeep; owners also read every member's, and set each member's budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
import re

from botocore.exceptions import BotoCoreError, ClientError
from pydantic.alias_generators import to_camel

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.projects import Member
from recall.domain.usage import Budget, Counts, Period, day_of, month_of, resets_at
from recall.errors import DomainError, Invalid
from recall.observability import logger
from recall.services.access import ProjectAccess
from recall.settings import Settings
from recall.store.projects import ProjectStore
from recall.store.usage import UsageStore

# The background jobs that may call the model, each counted apart. Consolidation merges
# entries by rule and calls no model, so it stays at zero unless that changes.
JOBS = ("extraction", "summary", "consolidation")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_MONTH = re.compile(r"[0-9]{4}-[0-9]{2}")
# Years a period may name: any later, and its reset would be past what a date can hold.
_YEARS = range(1970, 9999)


@dataclass
class MemberSpend:
    member: Member
    counts: Counts


@dataclass
class UsageReport:
    period: Period
    date: str
    # ``None`` for an earlier period: budgets and resets are the current period's.
    resets_at: datetime | None
    counts: Counts
    budget: Budget | None
    # Every member's (owners only; ``None`` for anyone else).
    members: list[MemberSpend] | None
    jobs: dict[str, Counts]


class UsageService:
    def __init__(
        self,
        settings: Settings,
        access: ProjectAccess,
        projects: ProjectStore,
        usage: UsageStore,
    ) -> None:
        self._settings = settings
        self._access = access
        self._projects = projects
        self._usage = usage

    def report(
        self, user_id: str, project_id: str, period: Period, date: str | None
    ) -> UsageReport:
        mine = self._access.member(user_id, project_id, Role.VIEWER)
        owner = mine.role is Role.OWNER
        now = clock.now()
        day, month, start = _period(period, date, now)
        current = (day or month) == (day_of(now) if period == "day" else month_of(now))
        if not current and start > now:
            raise Invalid(
                f"That {period} has not begun: ask for this {period} or an earlier one.",
                [{"field": "date", "message": "not in the future"}],
            )
        # Only an owner sees the others: anyone else reads just their own member item.
        seen = self._projects.members(project_id) if owner else [mine]
        counts = self._usage.members(project_id, [m.user_id for m in seen], day, month)
        jobs = self._usage.jobs(project_id, day, month)
        return UsageReport(
            period=period,
            date=day or month,
            resets_at=resets_at(period, start) if current else None,
            counts=counts.get(user_id, Counts()),
            budget=mine.budget,
            members=[MemberSpend(m, counts[m.user_id]) for m in seen] if owner else None,
            jobs={job: jobs.get(job, Counts()) for job in JOBS},
        )

    def set_budget(self, user_id: str, project_id: str, member_id: str, budget: Budget) -> Member:
        """Owners only; checked again by the write, so an owner demoted meanwhile changes
        nothing."""
        self._access.require(user_id, project_id, Role.OWNER)
        limit = self._settings.budget_max
        for name, value in budget.model_dump().items():
            if value is not None and not 0 < value <= limit:
                raise Invalid(
                    f"A budget is a whole number from 1 to {limit:,}.",
                    [{"field": to_camel(name), "message": f"1 to {limit}"}],
                )
        member = self._projects.set_budget(project_id, member_id, budget, user_id)
        logger.info(
            "budget set",
            extra={
                "project_id": project_id,
                "limits": sorted(budget.model_dump(exclude_none=True)),
            },
        )
        return member


class JobSpend:
    """Counts a background job's model calls under its project. A count that fails is
    logged, never a failed job: retrying the job would call the model again."""

    def __init__(self, usage: UsageStore) -> None:
        self._usage = usage

    def meter(self, project_id: str, job: str, now: datetime) -> Callable[[Counts], None]:
        def spent(counts: Counts) -> None:
            try:
                self._usage.count_job(project_id, job, counts, now)
            except (ClientError, BotoCoreError, DomainError):
                logger.warning("a job's model usage was not counted", extra={"job": job})

        return spent


def _period(period: Period, date: str | None, now: datetime) -> tuple[str | None, str, datetime]:
    """The day (``None`` for a month), the month, and a moment in the period asked for."""
    if date is None:
        return (day_of(now) if period == "day" else None), month_of(now), now
    pattern = _DAY if period == "day" else _MONTH
    try:
        if not pattern.fullmatch(date) or int(date[:4]) not in _YEARS:
            raise ValueError(date)
        start = datetime.fromisoformat(date if period == "day" else f"{date}-01").replace(
            tzinfo=now.tzinfo
        )
    except ValueError:
        shape = "YYYY-MM-DD" if period == "day" else "YYYY-MM"
        raise Invalid(
            f"A {period}'s date is {shape}.", [{"field": "date", "message": f"{shape}"}]
        ) from None
    return (date if period == "day" else None), date[:7], start
