"""A consolidation refused for its counts leaves the schedule until the next session, even
when an earlier one was too recent as well: only a refusal for the time gate alone waits
for that gate, over the embedded DynamoDB."""

from __future__ import annotations

from datetime import timedelta

import pytest

from recall.domain.jobs import ConsolidateJob
from recall.domain.memory import Source
from tests.integration.test_background_jobs import (
    HOUR,
    NOW,
    Recall,
    due_consolidations,
    entry,
)


@pytest.mark.parametrize("too_few", ["sessions", "entries"])
def test_a_consolidation_refused_for_too_few_soon_after_another_leaves_the_schedule(
    too_few: str,
) -> None:
    # Given a consolidation that ran, with five entries and three sessions
    recall = Recall()
    settings = recall.settings
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    for n in range(settings.consolidate_min_memories):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    recall.start_sessions(settings.consolidate_min_sessions)
    assert recall.consolidation.run(job, NOW).ran is True
    # And an hour later one session too few, or one entry too few, and the job queued
    later = NOW + HOUR
    if too_few == "entries":
        recall.memories.delete(recall.user, recall.project, "rule_0", None, Source.EXPLICIT, later)
        recall.start_sessions(settings.consolidate_min_sessions, later)
    else:
        recall.start_sessions(settings.consolidate_min_sessions - 1, later)
    assert due_consolidations(recall, later) == [(recall.user, recall.project)]
    # When the job runs
    report = recall.consolidation.run(job, later)
    # Then it is refused for its counts and leaves the schedule, not due when the day is over
    assert (report.ran, report.why) == (False, "too few sessions or entries")
    day = timedelta(seconds=settings.consolidate_min_seconds)
    assert due_consolidations(recall, later) == []
    assert due_consolidations(recall, NOW + day) == []
